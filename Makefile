# Thin wrapper over CMake: the README's commands.
#   make serve [ARGS="--port 8000 ..."]   build, then serve the bundled model
#   make test                             build, then run every test (+ a bounded fuzz run)
BUILD ?= build
CMAKE_FLAGS ?=
FUZZ_SECONDS ?= 30
ARGS ?=

.PHONY: all deps configure build serve test unit fuzz bench clean

all: build

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD)

serve: build
	@if [ ! -x $(BUILD)/bin/alice-llm-server ]; then \
	  echo "make serve: the server is not built yet ($(BUILD)/bin/alice-llm-server missing)" >&2; exit 1; fi
	$(BUILD)/bin/alice-llm-server $(ARGS)

unit: build
	@cd $(BUILD) && ctest --output-on-failure -j2

test: unit fuzz

fuzz: deps
	@scripts/fuzz.sh $(FUZZ_SECONDS)

bench: build
	@if [ ! -x $(BUILD)/bin/alice-bench ]; then echo "make bench: alice-bench is not built yet" >&2; exit 1; fi
	$(BUILD)/bin/alice-bench $(ARGS)

clean:
	rm -rf $(BUILD) build-fuzz
