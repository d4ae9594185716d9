#ifndef HEALTHD_VERSION_H
#define HEALTHD_VERSION_H

/* HEALTHD_VERSION ("0.1.0") and HEALTHD_REV ("git:<20 hex>") come from the
 * Makefile. */
#ifndef HEALTHD_VERSION
#define HEALTHD_VERSION "0.0.0"
#endif
#ifndef HEALTHD_REV
#define HEALTHD_REV "git:unknown"
#endif

#endif
