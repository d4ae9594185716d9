/* Following Docker's event stream (Docker source only): each event of the
 * app's Compose project asks the refresh loop for a refresh at once. The
 * watcher never waits on the loop and the loop never waits on it, so a hung
 * or silent stream only costs the early refreshes: the timer goes on. */
#ifndef HEALTHD_WATCH_H
#define HEALTHD_WATCH_H

#include "agent/config.h"
#include "base/err.h"

struct watcher;

/* Starts the watcher thread. kick(arg) is called for each event and after
 * every (re)subscription, since events were missed meanwhile. The thread
 * ends once cancel_fd becomes readable; then watch_join() joins it. */
int watch_start(const struct config *cfg, int cancel_fd, void (*kick)(void *), void *arg,
		struct watcher **out, struct errbuf *err);
/* Joins and frees; cancel_fd must have been made readable. NULL is fine. */
void watch_join(struct watcher *w);

#endif
