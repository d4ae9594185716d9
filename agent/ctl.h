/* SPDX-License-Identifier: Apache-2.0 */
/* `dstack-healthd status` and `dstack-healthd reload`: the operator's
 * commands, talking to the agent's control socket with the agent's own HTTP
 * client (runtime/http.h). */
#ifndef HEALTHD_CTL_H
#define HEALTHD_CTL_H

/* Exit status when the agent cannot be reached. */
#define CTL_EXIT_UNREACHABLE 3

/* argv[0] is the command ("status", "reload", "drain" or "resume").
 * Returns the exit status: status: 0 healthy, 1 not, 3 unreachable;
 * reload: 0 applied, 1 refused, 3 unreachable; drain: 0 draining (with
 * --wait: and every recent poller told), 1 some not told at --timeout;
 * resume: 0; 2 on a usage error. */
int ctl_main(int argc, char *argv[]);

#endif
