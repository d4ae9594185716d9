/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests for the relay's byte mover (rpc/pump.c): what a direction
 * does next, from its phase, the bytes in its pipe and its urgent byte.
 * The rules: the pipe is emptied before more is read, unless the end of
 * stream is there to be read first (then read to the end, and written
 * with the FIN); bytes before an urgent byte go first, and the urgent byte
 * before the end; the end is passed on once nothing is left; an ended
 * direction does nothing. */
#include <stdbool.h>

#include "rpc/pump.h"
#include "tests/lib/tap.h"

static const char *step_name(enum pump_step s)
{
	switch (s) {
	case PUMP_WRITE: return "write";
	case PUMP_SEND_URGENT: return "send urgent";
	case PUMP_PASS_END: return "pass end";
	case PUMP_READ: return "read";
	case PUMP_STOP: return "stop";
	}
	return "?";
}

static const struct {
	const char *name;
	enum flow_phase phase;
	size_t in_pipe;
	enum urgent urgent;
	bool read_ahead;
	enum pump_step want;
} cases[] = {
	{ "open, nothing in the pipe: read", FLOW_OPEN, 0, URGENT_NONE, false, PUMP_READ },
	{ "open, bytes in the pipe: write them before reading more", FLOW_OPEN, 10, URGENT_NONE,
	  false, PUMP_WRITE },
	{ "open, bytes in the pipe, the end there: read ahead to it first", FLOW_OPEN, 10,
	  URGENT_NONE, true, PUMP_READ },
	{ "open, the end there, nothing in the pipe: read", FLOW_OPEN, 0, URGENT_NONE, true,
	  PUMP_READ },
	{ "ending, bytes in the pipe: write them (with the FIN next)", FLOW_ENDING, 10,
	  URGENT_NONE, true, PUMP_WRITE },
	{ "ending, bytes in the pipe, no read ahead: write", FLOW_ENDING, 10, URGENT_NONE, false,
	  PUMP_WRITE },
	{ "ending, nothing left: pass the end on", FLOW_ENDING, 0, URGENT_NONE, false,
	  PUMP_PASS_END },
	{ "ending, the urgent byte left: it goes before the end", FLOW_ENDING, 0, URGENT_READ,
	  false, PUMP_SEND_URGENT },
	{ "open, the urgent byte read, nothing before it: send it", FLOW_OPEN, 0, URGENT_READ,
	  false, PUMP_SEND_URGENT },
	{ "open, the urgent byte read, bytes before it: those first", FLOW_OPEN, 10, URGENT_READ,
	  false, PUMP_WRITE },
	{ "open, an urgent byte announced, not read: read (to its mark)", FLOW_OPEN, 0,
	  URGENT_SEEN, false, PUMP_READ },
	{ "ended: nothing", FLOW_ENDED, 0, URGENT_NONE, false, PUMP_STOP },
	{ "ended, read ahead asked: nothing", FLOW_ENDED, 0, URGENT_NONE, true, PUMP_STOP },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct flow f;
		pump_flow_init(&f);
		f.phase = cases[i].phase;
		f.in_pipe = cases[i].in_pipe;
		f.urgent = cases[i].urgent;
		is_str(step_name(pump_next_step(&f, cases[i].read_ahead)), step_name(cases[i].want),
		       "%s", cases[i].name);
	}
	struct flow f;
	pump_flow_init(&f);
	ok(!pump_unsent(&f) && f.pipe[0] == -1 && f.phase == FLOW_OPEN,
	   "a new direction: open, no pipe, nothing unsent");
	f.in_pipe = 1;
	ok(pump_unsent(&f), "a byte in the pipe is unsent");
	f.in_pipe = 0;
	f.urgent = URGENT_READ;
	ok(pump_unsent(&f), "an urgent byte read is unsent");
	f.urgent = URGENT_SEEN;
	ok(!pump_unsent(&f), "an urgent byte announced and not read is not");
	return done_testing();
}
