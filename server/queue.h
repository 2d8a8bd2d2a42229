/* queue.h — messages into the event thread (bottom layer).
 *
 * The model loader thread and the engine thread never touch evhttp: they
 * post a message, and the event thread runs it when the notify pipe wakes
 * it (srv_msgq_drain, the one drain loop). A message is any struct that
 * starts with struct srv_msg; its `run` callback handles AND frees it, so
 * the queue knows no message kinds and calls no layer above it. */
#ifndef ALICE_SERVER_QUEUE_H
#define ALICE_SERVER_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

struct srv_msg {
	struct srv_msg *next;
	/* Runs on the event thread (or at shutdown, after the loop); frees m. */
	void (*run)(struct srv_msg *m, void *ctx);
};

struct srv_msgq {
	pthread_mutex_t mu; /* guards head/tail, held, pending */
	struct srv_msg *head, *tail;
	int notify_rd, notify_wr; /* non-blocking pipe; -1 when closed */
	bool held;                /* srv_msgq_hold: posts wait to wake the event thread */
	bool pending;             /* posted while held */
};

/* 0, or -1 with errno (the pipe could not be made). */
int srv_msgq_init(struct srv_msgq *q);
void srv_msgq_close(struct srv_msgq *q);
/* Any thread; never allocates, never fails. */
void srv_msgq_post(struct srv_msgq *q, struct srv_msg *m);
/* on: posts queue without waking the event thread; off: one wake-up for
 * all of them. The engine thread holds the queue around each round of its
 * events (a step's tokens for every stream: one wake-up, not one each). */
void srv_msgq_hold(struct srv_msgq *q, bool on);
/* Event thread: empty the pipe, then run every queued message in order
 * (messages posted meanwhile wait for the next wake-up). */
void srv_msgq_drain(struct srv_msgq *q, void *ctx);

#endif
