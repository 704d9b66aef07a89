/* url_sign.c - /view links that work under --token without the token: the OpenAI route's `url` responses.
 * A link carries expires (Unix seconds) and sig = HMAC-SHA256(key, "view\n" filename "\n" subfolder "\n" type
 * "\n" expires) in hex, the key being SHA-256 of a fixed label and the token, so every node started with the
 * same token verifies every other node's links and a link never reveals the token. */
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/openai.h"

static void link_sig(const kiln_server *srv, const char *f, const char *sub, const char *type, long long exp,
                     char hex[65]) {
    unsigned char key[SHA256_DIGEST_LENGTH], mac[EVP_MAX_MD_SIZE];
    char label[300];
    int n = snprintf(label, sizeof label, "kiln-signed-url\n%s", srv->token);
    SHA256((const unsigned char *)label, (size_t)n, key);
    char msg[1400];
    int m = snprintf(msg, sizeof msg, "view\n%s\n%s\n%s\n%lld", f, sub, type, exp);
    unsigned int len = 0;
    HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)msg, (size_t)(m < (int)sizeof msg ? m : 0), mac,
         &len);
    for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    OPENSSL_cleanse(key, sizeof key);
}

/* Percent-encodes everything but RFC 3986's unreserved characters. */
static bool pct(const char *s, char **o, size_t *cap) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                     c == '_' || c == '.' || c == '~';
        int n = plain ? snprintf(*o, *cap, "%c", c) : snprintf(*o, *cap, "%%%02X", c);
        if (n < 0 || (size_t)n >= *cap) return false;
        *o += n;
        *cap -= (size_t)n;
    }
    return true;
}

bool kiln_url_sign(const kiln_server *srv, const char *filename, const char *subfolder, const char *type,
                   long long expires, char *out, size_t cap) {
    if (strlen(filename) > 400 || strlen(subfolder) > 400) return false;
    char *o = out;
    size_t c = cap;
    int n = snprintf(o, c, "filename=");
    if (n < 0 || (size_t)n >= c) return false;
    o += n, c -= (size_t)n;
    if (!pct(filename, &o, &c)) return false;
    n = snprintf(o, c, "&subfolder=");
    if (n < 0 || (size_t)n >= c) return false;
    o += n, c -= (size_t)n;
    if (!pct(subfolder, &o, &c)) return false;
    n = snprintf(o, c, "&type=%s", type);
    if (n < 0 || (size_t)n >= c) return false;
    o += n, c -= (size_t)n;
    if (!srv->token[0]) return true;
    char hex[65];
    link_sig(srv, filename, subfolder, type, expires, hex);
    n = snprintf(o, c, "&expires=%lld&sig=%s", expires, hex);
    return n > 0 && (size_t)n < c;
}

bool kiln_url_signed_ok(kiln_req *r) {
    if (!r->srv->token[0] || strcmp(r->url, "/view") || strcmp(r->method, "GET")) return false;
    const char *f = kiln_req_arg(r, "filename"), *sub = kiln_req_arg(r, "subfolder");
    const char *type = kiln_req_arg(r, "type"), *exp = kiln_req_arg(r, "expires"), *sig = kiln_req_arg(r, "sig");
    if (!f || !exp || !sig || strlen(sig) != 64 || strlen(f) > 400 || (sub && strlen(sub) > 400)) return false;
    char *end;
    long long e = strtoll(exp, &end, 10);
    if (*end || end == exp || e < (long long)time(NULL)) return false;
    char hex[65];
    link_sig(r->srv, f, sub ? sub : "", type ? type : "output", e, hex);
    return CRYPTO_memcmp(hex, sig, 64) == 0;
}
