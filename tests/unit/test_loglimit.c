/* SPDX-License-Identifier: Apache-2.0 */
/* The journal's limiter (base/log.c, log_limit_pass): a cause a client can
 * cause once per connection is logged at most once every LOG_LIMIT_MS,
 * and the next line says how many were not. */
#include "base/log.h"
#include "tests/lib/tap.h"

int main(void)
{
	struct log_limit l = { 0 };
	unsigned more = 99;
	ok(log_limit_pass(&l, 1000, &more) && more == 0, "the first line of a cause is logged");
	ok(!log_limit_pass(&l, 1001, &more), "the next one at once is not");
	ok(!log_limit_pass(&l, 1000 + LOG_LIMIT_MS - 1, &more), "...nor one a ms before the limit");
	ok(log_limit_pass(&l, 1000 + LOG_LIMIT_MS, &more), "one at the limit is logged");
	is_int(more, 2, "...saying the 2 not logged since");
	ok(!log_limit_pass(&l, 1000 + LOG_LIMIT_MS + 1, &more), "and the count starts again");
	ok(log_limit_pass(&l, 1000 + 3 * LOG_LIMIT_MS, &more) && more == 1, "...1 since");
	struct log_limit early = { 0 };
	ok(log_limit_pass(&early, 0, &more) && !log_limit_pass(&early, 5, &more),
	   "a limiter at time 0 limits too");
	return done_testing();
}
