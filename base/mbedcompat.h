/* SPDX-License-Identifier: Apache-2.0 */
/* The mbedtls calls whose shape differs between the two library generations
 * the agent builds against (docs/design.md §2): mbedtls 2.28 (Debian 12) and
 * 3.6 (Debian 13, Yocto wrynose), chosen at compile time by
 * MBEDTLS_VERSION_NUMBER. Every other mbedtls call the agent makes has the
 * same shape in both. */
#ifndef HEALTHD_MBEDCOMPAT_H
#define HEALTHD_MBEDCOMPAT_H

#include <stddef.h>

#include <mbedtls/version.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define MBEDCOMPAT_3 1
#else
#define MBEDCOMPAT_3 0
#endif

/* SHA-256 of in into out; 0 or an mbedtls error. 3.0 gave the _ret
 * functions back their plain names and removed the _ret ones. */
static inline int mbedcompat_sha256(const unsigned char *in, size_t len, unsigned char out[32])
{
#if MBEDCOMPAT_3
	return mbedtls_sha256(in, len, out, 0);
#else
	return mbedtls_sha256_ret(in, len, out, 0);
#endif
}

/* An unencrypted PEM or DER private key from path. 3.0 added the RNG (for
 * the blinding of private-key operations while checking the key); 2.28
 * takes none and ignores these. */
static inline int mbedcompat_pk_parse_keyfile(mbedtls_pk_context *key, const char *path,
					      int (*f_rng)(void *, unsigned char *, size_t),
					      void *p_rng)
{
#if MBEDCOMPAT_3
	return mbedtls_pk_parse_keyfile(key, path, NULL, f_rng, p_rng);
#else
	(void)f_rng;
	(void)p_rng;
	return mbedtls_pk_parse_keyfile(key, path, NULL);
#endif
}

/* TLS 1.2 at least, as the docker CLI asks. 3.x deprecates the
 * major/minor call (Debian's 3.6 warns on it: MBEDTLS_DEPRECATED_WARNING)
 * and may offer TLS 1.3 above it. */
static inline void mbedcompat_conf_min_tls12(mbedtls_ssl_config *conf)
{
#if MBEDCOMPAT_3
	mbedtls_ssl_conf_min_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_2);
#else
	mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
#endif
}

/* Before the first TLS set-up: 3.x's TLS 1.3 (on in Debian's and Yocto's
 * builds) does its cryptography through PSA, whose state must be set up
 * once per process. 0 or an mbedtls/PSA error; 2.28 needs nothing. */
int mbedcompat_init(void);

#endif
