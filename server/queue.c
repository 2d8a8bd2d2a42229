/* queue.c — the message queue into the event thread (see queue.h). */
#define _GNU_SOURCE
#include "queue.h"

#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

int srv_msgq_init(struct srv_msgq *q)
{
	int p[2];
	q->head = q->tail = NULL;
	q->notify_rd = q->notify_wr = -1;
	q->held = q->pending = false;
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
		return -1; /* drain and close are no-ops then */
	q->notify_rd = p[0];
	q->notify_wr = p[1];
	pthread_mutex_init(&q->mu, NULL);
	return 0;
}

void srv_msgq_close(struct srv_msgq *q)
{
	if (q->notify_rd < 0)
		return;
	close(q->notify_rd);
	close(q->notify_wr);
	q->notify_rd = q->notify_wr = -1;
	pthread_mutex_destroy(&q->mu);
}

void srv_msgq_post(struct srv_msgq *q, struct srv_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&q->mu);
	bool was_empty = q->head == NULL;
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
	bool wake = was_empty && !q->held;
	q->pending = q->pending || q->held;
	pthread_mutex_unlock(&q->mu);
	if (wake) {
		char c = 1;
		/* non-blocking; a full pipe already guarantees a wake-up */
		ssize_t w = write(q->notify_wr, &c, 1);
		(void)w;
	}
}

void srv_msgq_hold(struct srv_msgq *q, bool on)
{
	if (q->notify_rd < 0)
		return;
	pthread_mutex_lock(&q->mu);
	q->held = on;
	bool wake = !on && q->pending;
	if (!on)
		q->pending = false;
	pthread_mutex_unlock(&q->mu);
	if (wake) {
		char c = 1;
		ssize_t w = write(q->notify_wr, &c, 1);
		(void)w;
	}
}

void srv_msgq_drain(struct srv_msgq *q, void *ctx)
{
	char buf[256];
	if (q->notify_rd < 0)
		return; /* never opened (or closed): nothing was posted */
	while (read(q->notify_rd, buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&q->mu);
	struct srv_msg *m = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->mu);
	while (m) {
		struct srv_msg *next = m->next;
		m->run(m, ctx);
		m = next;
	}
}
