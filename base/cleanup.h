/* SPDX-License-Identifier: Apache-2.0 */
/* Scope-bound resources, after systemd and crun: a local declared with one of
 * these is released when it goes out of scope. Hand ownership out by setting
 * the local to NULL (or -1 for fds). Every destructor accepts NULL / -1. */
#ifndef HEALTHD_CLEANUP_H
#define HEALTHD_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

static inline void cleanup_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(cleanup_fclosep)))

/* For a struct held by value whose T_free(struct T *) releases what it holds:
 * `_cleanup_(json_buf_free) struct json_buf b = { 0 };`. Every *_free of this
 * tree that takes the struct's address accepts a zeroed struct (and leaves
 * one behind), so the local must start zeroed or initialised. */
#define _cleanup_(f) __attribute__((cleanup(f)))

/* For a heap object whose f(T *) frees the object itself and accepts NULL:
 * DEFINE_PTR_CLEANUP(struct T, T_free) beside T_free's declaration defines
 * T_freep, for `_cleanup_(T_freep) struct T *p = NULL;`. */
#define DEFINE_PTR_CLEANUP(type, f) \
	static inline void f##p(type **p) \
	{ \
		f(*p); \
	}

/* Returns *p and sets it to NULL: ownership leaves the scope. */
#define TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define TAKE_FD(fd) ({ int _t = (fd); (fd) = -1; _t; })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
