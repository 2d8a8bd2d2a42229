/* log.h — one logger with levels for the whole process. The sink defaults to
 * stderr in text form; the server may switch it to JSON lines. Thread-safe. */
#ifndef ALICE_LOG_H
#define ALICE_LOG_H

enum alice_log_level {
	ALICE_LOG_DEBUG = 0,
	ALICE_LOG_INFO = 1,
	ALICE_LOG_WARN = 2,
	ALICE_LOG_ERROR = 3,
	ALICE_LOG_NONE = 4,
};

typedef void (*alice_log_sink_fn)(enum alice_log_level level, const char *msg, void *user);

/* Messages below `level` are dropped before formatting. Default: INFO,
 * or the value of ALICE_LOG_LEVEL (debug|info|warn|error|none) at first use. */
void alice_log_set_level(enum alice_log_level level);
enum alice_log_level alice_log_get_level(void);
/* Replace the sink (NULL restores the stderr text sink). */
void alice_log_set_sink(alice_log_sink_fn sink, void *user);
void alice_log(enum alice_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *alice_log_level_name(enum alice_log_level level);

#endif
