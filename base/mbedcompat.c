/* SPDX-License-Identifier: Apache-2.0 */
#include "base/mbedcompat.h"

#include <pthread.h>

#if MBEDCOMPAT_3 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>

static pthread_once_t psa_once = PTHREAD_ONCE_INIT;
static psa_status_t psa_status;

/* Once for the process (the refresh and the events thread both open TLS
 * connections): a failure is kept and returned to every later caller. */
static void psa_init_once(void)
{
	psa_status = psa_crypto_init();
}

int mbedcompat_init(void)
{
	pthread_once(&psa_once, psa_init_once);
	return psa_status == PSA_SUCCESS ? 0 : (int)psa_status;
}
#else
int mbedcompat_init(void)
{
	return 0;
}
#endif
