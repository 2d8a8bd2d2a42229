/* bench_batch.h — alice-bench --batch (see bench_batch.c). */
#ifndef ALICE_BENCH_BATCH_H
#define ALICE_BENCH_BATCH_H

#include "alice/model.h"

#define BATCH_MAX 16

struct batch_result {
	int B, ok;
	double pp_s, pp_tps;             /* B*P prompt tokens */
	double tg_s, tg_tps, tg_seq_tps; /* B*N decoded tokens; per sequence */
	double step_ms;                  /* one B-row decode step */
	double step_whole_ms;            /* the same reading every logits row whole */
	double step_pipe_ms;             /* pipelined: each step launched before the last is read, its
					    tokens fed from the last one's picks (0: not possible here) */
	char error[640];
};

/* One B: returns 0, or -1 with r->error set. temp > 0: every decode row is
 * drawn at that temperature on the device (SAMPLE_TEMP), else greedy. */
int bench_batch_run(struct alice_model *m, int B, int P, int N, float temp, struct batch_result *r);

#endif
