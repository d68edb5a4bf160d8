"""Number questions whose tolerance is wider than the course's precision (``tests/test_book_widths.py``) at the
values students are dealt, each named with a reason that holds at every value, not the book's printed rounding."""

_RATE = ("the chip's rate tolerance (solutions/_kit.py, rate_tolerance): the book's own rounded constants of the "
         "dealt chip (the B200's 2.25e15 FLOP/s) pass wherever that chip is asked")
_TP_DIVISOR = ("the book's H100 divisor F / 1995 (BOOK_H100_TP_DIVISOR) is its reading of the H100's C / W, accepted "
               "for every model on the H100, as a rounded constant of the chip is")
_STEP = ("carries the full-HBM step of IQ6, one question every student answers alike, credited from the book's 19 ms "
         "to 3% above it: a step so credited gives a value this far off")
_PER_TOKEN = ("carries IQ1's bytes per token, one question every student answers alike, credited at the book's 160 kB "
              "(2.4% low): a cache size built on it is this far off")

WIDE: dict[str, str] = {
    "ch03-pq2-small": "a latency-bound estimate: the book's hop latency is 'about 1 us' and its measured 2-4 us on "
                      "3 hops sets a range of 2/3 to 4/3 of the hop count, the same reading at every axis length",
    "ch03-q3-latency": "a latency-bound estimate: hops of about a microsecond whose bytes vary, 0.75 to 1.5 times the "
                       "model's time, the same reading at every cube side",
    "ch06-a5-min-chips": "carries the student's own total (credited to 1%) into the fewest chips: every whole count "
                         "reachable from an accepted total passes, at every batch and chip",
    "ch06-a5-days": "carries the fewest chips the student was credited with into the days: the days on any of those "
                    "counts pass, at every batch and chip",
    "ch08-iq1-kv-32k": _PER_TOKEN,
    "ch08-iq1-kv-240": _PER_TOKEN,
    "ch08-iq2-kv-bytes": _PER_TOKEN,
    "ch08-iq6-decode-time": _STEP,
    "ch08-iq7-bf16": _STEP,
    "ch08-iq7-int8": _STEP,
    "ch08-iq7-int4": _STEP,
    "ch08-iq8-bf16": _STEP,
    "ch08-iq8-int8": _STEP,
    "ch08-iq8-int4": _STEP,
    "ch08-iq12-ratio": _STEP,
    "ch11-c1-h100-tp-limit": _TP_DIVISOR,
    "ch11-c1-h100-days": _RATE,
    "ch11-c1-h100-dp-threshold": _RATE,
    "ch11-c1-h100-pp-threshold": _RATE,
    "ch12-q14-large-time": _RATE,
    "ch12-e1-h100-tc-flops": _RATE,
    "ch12-q52-tp-limit": _TP_DIVISOR,
    "ch12-q53-threshold-70b": _RATE,
    "ch12-q53-threshold-314b": _RATE,
    "ch12-e8-dp-node": _RATE,
    "ch12-e8-dp-scaleout": _RATE,
    "ch12-e8-llama-batch": _RATE,
    "ch12-e8-moe": _RATE,
    "ch12-e8-two-nodes": _RATE,
}
