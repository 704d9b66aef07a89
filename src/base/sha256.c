/* sha256.c - streaming SHA-256 over OpenSSL EVP (see sha256.h). */
#include "base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

struct kiln_sha256 {
    EVP_MD_CTX *md;
};

kiln_sha256 *kiln_sha256_new(kiln_err *err) {
    kiln_sha256 *h = kiln_calloc(1, sizeof *h);
    if (!h) {
        KILN_FAIL(err, KILN_E_NOMEM, "out of memory for a SHA-256 context");
        return NULL;
    }
    h->md = EVP_MD_CTX_new();
    if (!h->md || EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1) {
        KILN_FAIL(err, h->md ? KILN_E_INTERNAL : KILN_E_NOMEM, "libcrypto could not start a SHA-256 digest");
        kiln_sha256_free(h);
        return NULL;
    }
    return h;
}

void kiln_sha256_update(kiln_sha256 *h, const void *data, size_t n) {
    if (n) EVP_DigestUpdate(h->md, data, n);
}

void kiln_sha256_final(kiln_sha256 *h, char hex[65]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    hex[0] = '\0';
    if (EVP_DigestFinal_ex(h->md, d, &len) == 1 && len == 32)
        for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    kiln_sha256_free(h);
}

void kiln_sha256_free(kiln_sha256 *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->md);
    kiln_free(h);
}

bool kiln_sha256_buffer(const void *data, size_t n, char hex[65]) {
    kiln_sha256 *h = kiln_sha256_new(NULL);
    hex[0] = '\0';
    if (!h) return false;
    kiln_sha256_update(h, data, n);
    kiln_sha256_final(h, hex);
    return hex[0] != '\0';
}

kiln_status kiln_sha256_path(const char *path, char hex[65], uint64_t *bytes, kiln_err *err) {
    enum { BLOCK = 8 << 20 };
    hex[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: cannot open: %s", path,
                         strerror(errno));
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    unsigned char *buf = kiln_malloc(BLOCK);
    kiln_sha256 *h = buf ? kiln_sha256_new(err) : NULL;
    if (!h) {
        close(fd);
        kiln_free(buf);
        return buf ? err ? err->code : KILN_E_NOMEM : KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    }
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, BLOCK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            kiln_free(buf);
            kiln_sha256_free(h);
            return KILN_FAIL(err, KILN_E_IO, "%s: read failed: %s", path, strerror(e));
        }
        if (r == 0) break;
        kiln_sha256_update(h, buf, (size_t)r);
        total += (uint64_t)r;
    }
    close(fd);
    kiln_free(buf);
    kiln_sha256_final(h, hex);
    if (bytes) *bytes = total;
    if (!hex[0]) return KILN_FAIL(err, KILN_E_INTERNAL, "%s: libcrypto failed to finish the digest", path);
    return KILN_OK;
}
