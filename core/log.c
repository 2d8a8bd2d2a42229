/* log.c — the process-wide logger (see log.h). */
#include "alice/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1; /* -1: read ALICE_LOG_LEVEL on first use */
static alice_log_sink_fn log_sink;
static void *log_user;

static const char *const level_names[] = {"debug", "info", "warn", "error", "none"};

const char *alice_log_level_name(enum alice_log_level level)
{
	if ((unsigned)level > ALICE_LOG_NONE)
		return "?";
	return level_names[level];
}

static int level_from_env(void)
{
	const char *s = getenv("ALICE_LOG_LEVEL");
	if (s)
		for (int i = 0; i <= ALICE_LOG_NONE; i++)
			if (strcasecmp(s, level_names[i]) == 0)
				return i;
	return ALICE_LOG_INFO;
}

void alice_log_set_level(enum alice_log_level level)
{
	__atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

enum alice_log_level alice_log_get_level(void)
{
	int l = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	if (l < 0) {
		l = level_from_env();
		__atomic_store_n(&log_level, l, __ATOMIC_RELAXED);
	}
	return (enum alice_log_level)l;
}

void alice_log_set_sink(alice_log_sink_fn sink, void *user)
{
	pthread_mutex_lock(&log_lock);
	log_sink = sink;
	log_user = user;
	pthread_mutex_unlock(&log_lock);
}

void alice_log(enum alice_log_level level, const char *fmt, ...)
{
	if (level < alice_log_get_level() || level >= ALICE_LOG_NONE)
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	if (log_sink) {
		log_sink(level, msg, log_user);
	} else {
		char ts[32];
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
		fprintf(stderr, "%s %-5s %s\n", ts, level_names[level], msg);
	}
	pthread_mutex_unlock(&log_lock);
}
