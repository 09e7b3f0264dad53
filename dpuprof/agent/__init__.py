"""``dpuprof agent``: dpuprof left running on every node.

It records the whole host with the recorder's system-wide mode (dpuprof/record, ``-a``), writes
rotating recordings (``rotate.py``: a new file every N seconds or M bytes, the last K kept, each
file starting where the previous one ended) and turns every committed interval into Prometheus
counters (``metrics.py``), with each process's CPU attributed to its job by its cgroup v2 path
(``jobs.py``). Each completed file can also be projected per job (``projecting.py``) and pushed
as one pprof profile per job to a Pyroscope-compatible server (``push.py``), both in one background
thread (``background.py``). ``run.py`` puts them together; the command line is dpuprof/cli/agent.py.
"""
