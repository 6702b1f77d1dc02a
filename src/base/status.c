/*
 * status.c - text for gcx_status_t.
 *
 * One switch, no allocation; used by every layer's error messages.
 */
#include <gcx/status.h>

const char *gcx_strerror(gcx_status_t status)
{
    switch (status) {
    case GCX_OK:
        return "success";
    case GCX_INPROGRESS:
        return "operation in progress";
    case GCX_ERR_INVALID:
        return "invalid argument or value";
    case GCX_ERR_NOMEM:
        return "out of memory";
    case GCX_ERR_TIMEOUT:
        return "timed out";
    case GCX_ERR_PEER:
        return "peer failed or connection lost";
    case GCX_ERR_MISMATCH:
        return "ranks disagree on the arguments of a collective";
    case GCX_ERR_TRANSPORT:
        return "transport error";
    case GCX_ERR_UNSUPPORTED:
        return "not supported";
    case GCX_ERR_NOT_FOUND:
        return "not found";
    case GCX_ERR_IO:
        return "input/output error";
    case GCX_ERR_RANGE:
        return "value out of range";
    case GCX_ERR_UNDECODABLE:
        return "arrived set is not decodable";
    case GCX_ERR_CANCELED:
        return "canceled";
    case GCX_ERR_REVOKED:
        return "communicator revoked";
    }
    return "unknown status";
}
