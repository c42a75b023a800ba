/* serve_jnum.h — `loom serve`'s request bodies parsed with their numbers as written: a number Jansson cannot hold
 * (beyond 64 bits or a double) given a stand-in the checks refuse, and every number's JSON text kept, so that a
 * message names what the client sent (1e400, 1e-400, 0.1), never what it parsed to (inf, 0, 0.10000000000000001). */
#ifndef LOOM_CLI_SERVE_JNUM_H
#define LOOM_CLI_SERVE_JNUM_H

#include <jansson.h>
#include <stddef.h>

#define SERVE_BIG_MAX 16 /* numbers beyond what Jansson holds, at most, in one body */
/* A message shows a number's text whole up to SERVE_JNUM_SHOWN bytes; a longer one as its first SERVE_JNUM_SHOWN
 * bytes and "..." (messages stay bounded), in a buffer of SERVE_JNUM_CAP bytes. */
#define SERVE_JNUM_SHOWN 40
#define SERVE_JNUM_CAP (SERVE_JNUM_SHOWN + 4)

/* Parse body[len] (JSON_DECODE_ANY) for the calling thread, each number Jansson overflows on replaced by a
 * stand-in real (one of the largest doubles, signed as the number: every range refuses it, no integer field takes
 * it). NULL with je filled as json_loadb's when it fails otherwise (or holds more than SERVE_BIG_MAX such numbers).
 * body stays the caller's until serve_jnum_release. */
json_t *serve_jnum_parse(const char *body, size_t len, json_error_t *je);

/* Free a parsed body and forget its numbers' texts. */
void serve_jnum_release(json_t *o);

/* The number's text (cut as SERVE_JNUM_SHOWN says) when v stands in for one beyond what Jansson holds, else NULL. */
const char *serve_jnum_big(const json_t *v);

/* The first stand-in in the body (its text in *text), or NULL when there is none. */
const json_t *serve_jnum_first_big(const char **text);

/* Number v of the body as its JSON text, into buf[cap] (cap at least SERVE_JNUM_CAP; a long one cut as
 * SERVE_JNUM_SHOWN says): buf, or NULL when v is no number of the body last parsed on this thread. */
const char *serve_jnum_text(const json_t *v, char *buf, size_t cap);

/* Whether number v of the body is written with a digit other than 0 before any exponent, read in its whole text
 * (0.000...0001 of any length; a stand-in: yes), else 0 (also when v is no number of the body). */
int serve_jnum_written_nonzero(const json_t *v);

#endif
