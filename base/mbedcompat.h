/* SPDX-License-Identifier: Apache-2.0 */
/* The mbedtls calls whose shape differs between the two library generations
 * the agent builds against (docs/design/dependencies.md): mbedtls 2.28 (Debian 12) and
 * 3.6 (Debian 13, Yocto wrynose), chosen at compile time by
 * MBEDTLS_VERSION_NUMBER. Every other mbedtls call the agent makes has the
 * same shape in both. */
#ifndef HEALTHD_MBEDCOMPAT_H
#define HEALTHD_MBEDCOMPAT_H

#include <stdbool.h>
#include <stddef.h>

#include <mbedtls/version.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ciphersuites.h>

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define MBEDCOMPAT_3 1
#else
#define MBEDCOMPAT_3 0
#endif

/* The probes read the server's certificate while the handshake is under way
 * (mbedcompat_handshake_peer_cert); without this option mbedtls keeps only
 * its digest and key, elsewhere. Debian's and Yocto's builds have it. */
#ifndef MBEDTLS_SSL_KEEP_PEER_CERTIFICATE
#error "mbedtls must be built with MBEDTLS_SSL_KEEP_PEER_CERTIFICATE"
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

/* Key exchange by elliptic-curve Diffie-Hellman only, on X25519, P-256 and
 * P-384, for a client facing a server it does not trust (the agent's
 * probes). Each of those costs a millisecond at most; a finite-field one
 * costs what the server chooses: TLS 1.2's DHE takes the server's prime
 * whatever its size, and 3.x's default groups add RFC 7919's up to 8192
 * bits for TLS 1.3. A suite or group the build lacks is skipped by
 * mbedtls. 3.x names the groups by IANA number and calls the curves call
 * deprecated; 2.28 has only that one, and no TLS 1.3. */
static inline void mbedcompat_conf_ecdhe_only(mbedtls_ssl_config *conf)
{
	static const int suites[] = {
#ifdef MBEDTLS_TLS1_3_AES_128_GCM_SHA256
		MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
		MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
		MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
#endif
		MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
		MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
		MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384,
		MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384,
		0,
	};
	mbedtls_ssl_conf_ciphersuites(conf, suites);
#if MBEDCOMPAT_3
	static const uint16_t groups[] = {
		MBEDTLS_SSL_IANA_TLS_GROUP_X25519, MBEDTLS_SSL_IANA_TLS_GROUP_SECP256R1,
		MBEDTLS_SSL_IANA_TLS_GROUP_SECP384R1, MBEDTLS_SSL_IANA_TLS_GROUP_NONE,
	};
	mbedtls_ssl_conf_groups(conf, groups);
#else
	static const mbedtls_ecp_group_id curves[] = {
		MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1,
		MBEDTLS_ECP_DP_NONE,
	};
	mbedtls_ssl_conf_curves(conf, curves);
#endif
}

/* True once the handshake is over. 3.x made the state private and added
 * this call; 2.28 has only the state. */
static inline bool mbedcompat_handshake_over(mbedtls_ssl_context *ssl)
{
#if MBEDCOMPAT_3
	return mbedtls_ssl_is_handshake_over(ssl);
#else
	return ssl->state == MBEDTLS_SSL_HANDSHAKE_OVER;
#endif
}

/* The server's certificate chain as soon as a handshake step has parsed it,
 * before the server's signature is checked; NULL before. Both generations'
 * mbedtls_ssl_get_peer_cert read the session of a finished handshake
 * (ssl->session, set at its end), so this reads the session being
 * negotiated, a private field in 3.x. */
static inline const mbedtls_x509_crt *mbedcompat_handshake_peer_cert(const mbedtls_ssl_context *ssl)
{
#if MBEDCOMPAT_3
	const mbedtls_ssl_session *s = ssl->MBEDTLS_PRIVATE(session_negotiate);
	return s ? s->MBEDTLS_PRIVATE(peer_cert) : NULL;
#else
	return ssl->session_negotiate ? ssl->session_negotiate->peer_cert : NULL;
#endif
}

/* Before the first TLS set-up: 3.x's TLS 1.3 (on in Debian's and Yocto's
 * builds) does its cryptography through PSA, whose state must be set up
 * once per process. 0 or an mbedtls/PSA error; 2.28 needs nothing. */
int mbedcompat_init(void);

#endif
