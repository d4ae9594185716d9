# SPDX-License-Identifier: Apache-2.0
# dstack-healthd serves plain HTTP (the gateway's poll, on the guest's own
# network; TLS is the gateway's business). openembedded-core's libmicrohttpd
# defaults to PACKAGECONFIG "curl https": https links libmicrohttpd against
# gnutls and libgcrypt, which the image would then carry for nothing; curl is
# only for libmicrohttpd's own tests. Both off. An image that needs TLS in
# libmicrohttpd for another program drops this file (README.md here).
PACKAGECONFIG:remove = "curl https"
