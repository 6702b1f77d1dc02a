/*
 * request.h - handing a task to its communicator (request.c); the public
 * request API (gcx_test, gcx_wait, ...) is in gcx/gcx.h.
 */
#ifndef GCX_CORE_REQUEST_H
#define GCX_CORE_REQUEST_H

#include "task.h"

#include <gcx/gcx.h>

/**
 * Hand a new top-level task to the communicator. With @p req_p the request
 * is returned and GCX_OK; with NULL the call waits and returns the final
 * status (and frees the task). If the communicator has failed, the task is
 * freed and the communicator's error returned.
 */
gcx_status_t gcx_task_submit(gcx_task_t *task, gcx_request_t **req_p);

/**
 * Start a task outside the FIFO (point-to-point): posted at once, tracked
 * on the communicator's p2p list, GCX_TIMEOUT from now. Otherwise as
 * gcx_task_submit; the sequence number is not used.
 */
gcx_status_t gcx_task_start(gcx_task_t *task, gcx_request_t **req_p);

#endif
