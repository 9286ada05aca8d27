"""Drift statistics over local files, computed on the operator's machine: ``myoloctl drift baseline set`` and
``myoloctl drift compare``. Not part of the running component: a library its command lines call, with the
component's own statistics and rule, so a file never travels, only a bounded summary or a verdict.

``files`` reads a whole (bounded) file into columns, ``stream`` reads one in chunks, ``sketch`` keeps a bounded
summary per column of a stream.
"""
