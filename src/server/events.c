/* events.c - websocket events across nodes. On a shared store (PostgreSQL) every event goes through it
 * (NOTIFY kiln_events) to every node's listener - this node's included - so a client connected to any node
 * gets the events of a job run on any node, in the order they were published. Binary previews stay local
 * (too large for a notification). Alone (SQLite), events go straight to this node's hub. */
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

char *kiln_events_encode(kiln_server *srv, const char *client_id, const char *type, json_t *data) {
    if (!kiln_store_shared(srv->store)) return NULL;
    json_t *m = json_pack("{s:s?, s:s, s:O}", "c", client_id, "t", type, "d", data);
    char *txt = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    if (txt && strlen(txt) >= KILN_STORE_NOTICE_MAX) { /* too long for a notification: this node's clients only */
        free(txt);
        txt = NULL;
    }
    return txt;
}

void kiln_events_send(kiln_server *srv, const char *client_id, const char *type, json_t *data) {
    char *txt = kiln_events_encode(srv, client_id, type, data);
    bool sent = txt && kiln_store_publish(srv->store, "kiln_events", txt);
    free(txt);
    if (sent) {
        json_decref(data);
        return;
    }
    kiln_ws_send(srv->hub, client_id, type, data);
}

void kiln_events_deliver(void *ctx, const char *channel, const char *payload) {
    kiln_server *srv = ctx;
    if (!strcmp(channel, "kiln_jobs")) { /* a job was added (or handed back) somewhere: look for work */
        if (srv->worker) kiln_worker_wake(srv->worker);
        return;
    }
    json_t *m = json_loads(payload, 0, NULL);
    const char *type = json_string_value(json_object_get(m, "t"));
    json_t *data = json_object_get(m, "d");
    if (type && json_is_object(data) && srv->hub)
        kiln_ws_send(srv->hub, json_string_value(json_object_get(m, "c")), type, json_incref(data));
    json_decref(m);
}
