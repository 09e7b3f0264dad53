"""The Recording file format: one SQLite database (docs/recording.md).

Units are in the column names: ``_s`` seconds, ``_ns`` nanoseconds, ``_bytes`` bytes, ``_us``
microseconds. Every per-interval table carries ``interval`` (a row of ``intervals``); all counters are
deltas over that interval, never running totals, so a file cut short by ``kill -9`` is still
consistent up to its last committed interval.

``meta`` holds one JSON value per key. Keys written by the recorder:
  schema_version, dpuprof_version, host, kernel, cpu_model, cpu_count, nic_speeds_mbps,
  command (list), cwd, start_time, end_time (unix s; end_time absent if cut short), complete (bool),
  exit_code, mode ("bpf" or "psutil"), sample_freq_hz, interval_s, probes_used (list),
  probes_unavailable ({probe: reason}), category_split (bool), root_pid, recorder_pid, user, gpu,
  rules_sha256 (of the classification rules used), uprobes ({target: "attached" or why not}),
  uprobes_paths ({target: [files attached]}), python_frames (one line: whether .py frames can
  appear in stacks, or why not; docs/python-frames.md), workload ("command", "attach", "cgroup" or
  "system-wide": what in_workload marks), system_wide (bool, -a), duration_s (the --duration
  window or null), attached ([{pid, comm, cmdline}] of -p), cgroup (the --cgroup directory),
  stop_reason ("command exited", "workload exited", "duration" or "stopped"), job ({job_id,
  job_id_source: "--job-id", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID" or null, host, and SLURM_PROCID,
  SLURM_NODEID, RANK, NODE_RANK where set}: which job's node this is, record/metadata.py), stack_buckets (v3,
  written by the writer's close: which stack samples were merged, see stack_counts), probe_cost (v5:
  "measured" when the probe_cost table holds run times, else "unavailable: <reason>"), duty
  ({on_s, period_s}, written by ``agent --duty``: on_s recorded of every period_s, the probes
  detached in between, so the intervals leave gaps and the recording's duration is the intervals'
  span less the gaps; absent: no gaps), command_cpu_s (the command tree's CPU seconds as the kernel
  counted them when it was reaped, getrusage RUSAGE_CHILDREN; written only when the recording
  covered the command's whole life: the self-check of the workload's CPU, recording/summary.py),
  io_sources ({table: counter}: net_io, block_io and sock_io read from the kernel's counters,
  "/proc/PID/net/dev", "/proc/diskstats" and "sock_diag tcp_info ...", where no per-event probe
  counted them; absent in older files, whose probes counted them. sock_io from sock_diag has TCP
  rows only, ``calls`` 0 (not counted) and pid 0 for sockets of no workload process).

Version 2 adds what the projection's critical-path model needs: per-thread scheduling of the
workload's threads (``threads``, ``thread_time``, ``thread_wait``, ``thread_category``), collective
operations and training-step markers (``collectives``, ``markers``) and bytes per cipher/codec call
(``codec_calls``). A version-1 file reads with those tables empty (``SINCE``).

Version 3 adds the GPU beside the host (``gpu_process``: each process's share of a GPU, where NVML
reports it; ``gpu.mem_total_bytes``) and stores less (issue 11, docs/recording.md): category
names once (``subcategories``) and CPU time as integer ns, packed per interval (``cpu_counts``), stacks as packed frame-id
blobs (``stack_list``), stack samples as one packed row per interval and process
(``stack_counts``), old stack samples merged into coarser buckets when the run ends (meta
``stack_buckets``), and SQL views (``VIEWS``) that give ``cpu_category``, ``stacks``,
``stack_samples`` and friendlier ``v_*`` views to the sqlite3 CLI. A version-1 or -2
file reads with the new tables empty and the new columns missing; the reader gives every version
the same DataFrames (``TABLES``).

Version 4 stores the per-thread tables packed (issue 11): ``thread_time_packed``,
``thread_wait_packed`` and ``thread_category_packed`` hold one blob per interval
(dpuprof/recording/threadpack.py), and ``thread_time``, ``thread_wait`` and ``thread_category``
become views with the v2/v3 columns and units. The reader gives v2 to v4 the same DataFrames.

Version 5 stores what the recorder itself cost (issue 20): ``probe_cost`` (each loaded BPF
program's runs and run time per interval, from ``bpf_prog_info`` with BPF run-time statistics on;
meta ``probe_cost`` says "measured" or "unavailable: <reason>") and ``recorder_cpu`` (the recorder
process's own user and system CPU per interval, children excluded). Samples taken in dpuprof's own
BPF programs are classified ``observer.bpf`` (category ``observer``, not a category of work). A
file of version 4 or older reads with both tables empty and has no observer rows.

Version 6 samples the waits (issue 32): with ``record --wait-duty W/P`` sched_wait's wake-up
program runs in the first W of every P seconds only, and ``intervals.waits_s`` says how many
seconds of each interval it ran (NULL: all of it, as in every older file, or no sched_wait);
``thread_wait`` holds the waits woken in those seconds, and the projection scales them by the
window's seconds over those (dpuprof/project/paths.py). Meta ``wait_duty`` ({on_s, period_s})
says the schedule. A file of version 5 or older reads with ``waits_s`` NULL.
"""

from dpuprof.recording import threadpack

SCHEMA_VERSION = 6

#: Versions this code can read. Older versions are upgraded in memory by the reader.
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)

DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- v6: waits_s, the seconds of the interval that sched_wait's wake-up program was attached
-- (record --wait-duty: thread_wait holds the waits woken in those seconds only); NULL when it was
-- attached throughout, or not loaded.
CREATE TABLE IF NOT EXISTS intervals (
    interval INTEGER PRIMARY KEY, t_start REAL NOT NULL, t_end REAL NOT NULL, waits_s REAL);
-- Every process seen: the workload tree (in_workload=1) and, for host-wide views, the rest. pid is
-- in the host's PID namespace; ns_pid is the pid inside its own (container) PID namespace, NULL
-- when that is the host's; cgroup its cgroup v2 path (/proc/PID/cgroup), NULL when unknown.
CREATE TABLE IF NOT EXISTS processes (
    pid INTEGER PRIMARY KEY, ppid INTEGER, comm TEXT, cmdline TEXT,
    in_workload INTEGER NOT NULL DEFAULT 0, first_seen REAL, last_seen REAL,
    ns_pid INTEGER, cgroup TEXT);
-- CPU samples classified per interval x process x (sub)category; pid 0 is the idle task.
-- samples are equal-weight counts (the mix); cpu_s is the process's exact on-CPU time in the
-- interval split across its subcategories in proportion to samples (dpuprof/record/drain/accounting.py
-- states the policy and how it changed: a workload process's time is the kernel's own total, the
-- rest of the host's busy time is shared by the other samples, idle and steal are /proc/stat's).
-- A workload process that ran but was never sampled has samples 0 and subcategory
-- kernel_other.unsampled; idle.steal is time the hypervisor gave to someone else.
-- v3: the (category, subcategory) pairs, each stored once; cpu_counts and stack_list name them by id.
CREATE TABLE IF NOT EXISTS subcategories (
    subcategory_id INTEGER PRIMARY KEY, category TEXT NOT NULL, subcategory TEXT NOT NULL,
    UNIQUE (category, subcategory));
-- CPU samples classified per interval x process x (sub)category; pid 0 is the idle task.
-- samples are equal-weight counts (the mix); cpu_ns is the process's exact on-CPU time in the
-- interval split across its subcategories in proportion to samples, rounded to the nanosecond
-- (the policy: dpuprof/record/drain/accounting.py). A workload process that ran but was never
-- sampled has samples 0 and subcategory kernel_other.unsampled; idle.steal is the hypervisor's.
-- v5: category observer (subcategory observer.bpf) holds samples whose kernel stack ran one of
-- dpuprof's own BPF programs (docs/taxonomy.md): not work of the process, kept out of its totals.
-- v3 stores one row per interval: counts is the packed list (packing.py) of (pid,
-- subcategory_id, samples, cpu_ns) 4-tuples, ascending. (v1/v2 stored the table cpu_category, one
-- row per tuple with the names as text and cpu_s REAL; in v3 cpu_category is a view of this table
-- with those same columns.)
CREATE TABLE IF NOT EXISTS cpu_counts (interval INTEGER PRIMARY KEY, counts BLOB NOT NULL);
-- Stack frames, each text stored once: kernel frames end in "_[k]", user frames are
-- "symbol (module)".
CREATE TABLE IF NOT EXISTS frames (frame_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
-- v3: stacks and how they were classified. frames is the packed list of frame_ids, root first:
-- each id in base 128, most significant group first, every byte but an id's last with the top
-- bit set (dpuprof/recording/packing.py; the view v_stack_frames unpacks it in SQL). Readers get
-- stacks as folded text (frame names joined with ';'), the flamegraph.pl convention (the view
-- stacks). cause: for a stack with kernel frames, the user-space work that made the kernel run
-- ("crypto", "compression", "python-alloc", ...; "" if none or unknown), docs/taxonomy.md. The
-- same folded stack can appear twice when a thread rule (collective transport threads)
-- classified it. (v1/v2 stored the table stacks: frame_ids as space-separated text.)
CREATE TABLE IF NOT EXISTS stack_list (
    stack_id INTEGER PRIMARY KEY, frames BLOB NOT NULL, subcategory_id INTEGER NOT NULL,
    cause TEXT NOT NULL DEFAULT '');
-- v3: samples per interval x process x stack: counts is the packed list (packing.py) of
-- (stack_id, samples) pairs, stack_id ascending; the view stack_samples gives one row per pair,
-- the v1/v2 table of that name. meta stack_buckets (when present) says which intervals were merged
-- at the end of the run: {"before": K, "intervals": B}: rows with interval < K each hold the
-- samples of intervals [interval, interval + B).
CREATE TABLE IF NOT EXISTS stack_counts (
    interval INTEGER NOT NULL, pid INTEGER NOT NULL, counts BLOB NOT NULL,
    PRIMARY KEY (interval, pid)) WITHOUT ROWID;
-- Exact softirq time per CPU and vector (irq:softirq_entry/exit).
CREATE TABLE IF NOT EXISTS softirq (
    interval INTEGER NOT NULL, cpu INTEGER NOT NULL, vector TEXT NOT NULL,
    time_ns INTEGER NOT NULL, count INTEGER NOT NULL);
-- Block IO completed per device and op ("read", "write", "other").
CREATE TABLE IF NOT EXISTS block_io (
    interval INTEGER NOT NULL, dev TEXT NOT NULL, op TEXT NOT NULL,
    bytes INTEGER NOT NULL, ios INTEGER NOT NULL);
-- Block IO latency, log2 histogram: count of IOs with latency < le_us (and >= le_us/2).
CREATE TABLE IF NOT EXISTS block_latency (
    interval INTEGER NOT NULL, op TEXT NOT NULL, le_us INTEGER NOT NULL, count INTEGER NOT NULL);
-- Packets and bytes per network device and direction ("tx", "rx").
CREATE TABLE IF NOT EXISTS net_io (
    interval INTEGER NOT NULL, dev TEXT NOT NULL, direction TEXT NOT NULL,
    bytes INTEGER NOT NULL, packets INTEGER NOT NULL);
-- Socket payload bytes per process, protocol ("tcp", "udp", ...) and direction; calls 0 where
-- meta io_sources names sock_diag (it counts bytes, not calls).
CREATE TABLE IF NOT EXISTS sock_io (
    interval INTEGER NOT NULL, pid INTEGER NOT NULL, protocol TEXT NOT NULL,
    direction TEXT NOT NULL, bytes INTEGER NOT NULL, calls INTEGER NOT NULL);
-- Counted events: "tcp_retransmit", ...
CREATE TABLE IF NOT EXISTS events (
    interval INTEGER NOT NULL, event TEXT NOT NULL, count INTEGER NOT NULL);
-- psutil: per-process user/system CPU of the workload tree.
CREATE TABLE IF NOT EXISTS proc_cpu (
    interval INTEGER NOT NULL, pid INTEGER NOT NULL, user_s REAL NOT NULL, system_s REAL NOT NULL);
-- psutil: host cpu_times summed over all CPUs; field in user, nice, system, irq, softirq, iowait,
-- steal, idle.
CREATE TABLE IF NOT EXISTS host_cpu (
    interval INTEGER NOT NULL, field TEXT NOT NULL, seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS host_disk (
    interval INTEGER NOT NULL, read_bytes INTEGER NOT NULL, write_bytes INTEGER NOT NULL,
    read_count INTEGER NOT NULL, write_count INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS host_net (
    interval INTEGER NOT NULL, dev TEXT NOT NULL, bytes_sent INTEGER NOT NULL,
    bytes_recv INTEGER NOT NULL, packets_sent INTEGER NOT NULL, packets_recv INTEGER NOT NULL);
-- GPU per device per interval (NVML): util_pct the reading at the end of the interval (the share of
-- NVML's own sample period, 1/6 s to 1 s by device, in which a kernel ran; not an interval average)
-- (nvmlDeviceGetUtilizationRates .gpu), mem_used_bytes / mem_total_bytes (v3) device memory.
CREATE TABLE IF NOT EXISTS gpu (
    interval INTEGER NOT NULL, gpu_index INTEGER NOT NULL, util_pct REAL, mem_used_bytes INTEGER,
    mem_total_bytes INTEGER);
-- v3: per process per GPU per interval, where NVML gives it (nvmlDeviceGetProcessUtilization):
-- sm_util_pct the process's SM utilisation, mem_used_bytes its device memory (NULL if unknown).
CREATE TABLE IF NOT EXISTS gpu_process (
    interval INTEGER NOT NULL, gpu_index INTEGER NOT NULL, pid INTEGER NOT NULL, sm_util_pct REAL,
    mem_used_bytes INTEGER);
-- Data lost, never silently (count = samples or events of the interval):
--   "samples_map_full"        a CPU sample dropped: the in-kernel counts map was full
--   "kernel_stack_collision", "user_stack_collision"   the sample kept, its kernel/user stack
--                             lost to the stack maps: other stacks held its hash bucket in both
--                             the stack map and its spill map (-EEXIST)
--   "kernel_stack_map_full", "user_stack_map_full"     same, the stack map had no free entry (-ENOMEM)
--   "kernel_stack_error", "user_stack_error"           same, any other error of bpf_get_stackid
--   "user_stack_unwalkable"   not a map loss: a sample taken in user mode whose user stack could
--                             not be walked at all (-EFAULT); the sample keeps its leaf frame
--   (stack map loss = the *_collision + *_map_full kinds; recordings before schema v2 have
--   "kernel_stack_lost" / "user_stack_lost", every failed walk but -EFAULT lumped together)
--   "run_map_full", "tree_map_full", "exec_map_full", "block_start_map_full", "net_map_full", "sock_map_full"
--   "missed_<program>"        events the kernel skipped while another BPF program ran on that CPU
--                             (bpf_prog_info.recursion_misses), ...
CREATE TABLE IF NOT EXISTS lost (
    interval INTEGER NOT NULL, kind TEXT NOT NULL, count INTEGER NOT NULL);
-- v5: what dpuprof's own BPF programs cost, per interval and program (the program's function name
-- in probes/*.bpf.c; a program loaded twice is summed): runs, the times it ran, and run_ns, the
-- nanoseconds it ran (struct bpf_prog_info run_cnt / run_time_ns deltas; the kernel counts them
-- only while BPF run-time statistics are on, which the recorder turns on for the recording: meta
-- probe_cost says "measured", or "unavailable: <reason>" and then the table is empty). run_ns is
-- the programs' own time; the kernel's cost of calling them (tracepoint glue) is in the samples
-- classified observer.bpf.
CREATE TABLE IF NOT EXISTS probe_cost (
    interval INTEGER NOT NULL, program TEXT NOT NULL, runs INTEGER NOT NULL, run_ns INTEGER NOT NULL);
-- v5: the recorder process's own CPU per interval (os.times of the dpuprof process: all its threads,
-- children excluded): user_s and system_s seconds. Its BPF programs run in other tasks' contexts and
-- are not in it (probe_cost).
CREATE TABLE IF NOT EXISTS recorder_cpu (
    interval INTEGER NOT NULL, user_s REAL NOT NULL, system_s REAL NOT NULL);
-- v2: every thread of the workload seen (tid in the host PID namespace; pid = its process).
-- last_seen: its exit, or the end of the last interval that saw it alive. The recorder writes a
-- live thread's row with last_seen NULL when it changes, and that end into every NULL as the file
-- closes; a killed recorder leaves NULL, which the reader takes as the last interval's end.
CREATE TABLE IF NOT EXISTS threads (
    tid INTEGER PRIMARY KEY, pid INTEGER NOT NULL, comm TEXT, first_seen REAL, last_seen REAL);
-- v2: per-thread scheduler time of workload threads per interval (/proc/PID/task/TID/schedstat):
-- on_cpu_ns on the CPU, runq_ns runnable but waiting for a CPU (run-queue delay), off_cpu_ns
-- neither (blocked or sleeping: interval length - on_cpu - runq while the thread lived).
-- A thread's last partial interval (it exited, /proc no longer shows it) and the life of a thread
-- shorter than an interval come from its schedstat counters as it exits (read by the sched_wait
-- probe at sched_process_exit, since 2026-12-04; before, the probe's own); without that probe they
-- are missing and counted in lost as "thread_exit_unaccounted" (dpuprof/record/drain/threads.py).
-- off_cpu_ns also holds steal (schedstat's on-CPU time leaves out what the hypervisor took while
-- the thread held the vCPU) and, where runq_ns is schedstat's, each wake-up's latency (from
-- sched_waking until the wakee is queued, e.g. an IPI to an idle vCPU): docs/thread-accounting.md.
-- v2/v3 stored the table thread_time (interval, tid, on_cpu_ns, runq_ns, off_cpu_ns), all INTEGER;
-- v4 stores thread_time_packed (below) and thread_time is a view of it with those columns.
-- v2: blocked time of workload threads by why and by who woke them (sched_switch prev_state and
-- sched_waking): state "io" (uninterruptible, D), "sleep" (interruptible, S) or "other" (stopped,
-- traced); waker_pid/waker_tid the task that woke it (0 when woken from interrupt context: a
-- device interrupt, an expiring hrtimer, a softirq; -1 when the wake-up was not seen, the wait
-- then ending at the switch-in), ns the time from switch-out to wake-up, count the wake-ups. A
-- wait is counted in the interval its wake-up falls in; preemption is run-queue time, not a wait.
-- Since 2026-12-04 (same meaning, measured otherwise: no program on sched_switch) ns is taken at
-- the wake-up: the time since the thread's previous wake-up less its schedstat on-CPU and
-- run-queue time since then, the state the one it is woken from; waker -1 no longer occurs, and
-- lost's "wake_unseen" counts a thread's first wake-up after the probe first saw it (no baseline).
-- Since 2026-12-05 count is the scheduler's count of voluntary switches (nvcsw) since the previous
-- measured wake-up: a wait whose wake-up raced the sleeper's schedule() is counted, and timed, with
-- the next one (docs/thread-accounting.md).
-- v5: waker_tid is the waking thread only for the waits of a process's main thread (tid = pid:
-- a rank, a DataLoader worker, the threads the critical-path model follows); another thread's
-- waits name the waker's process (waker_tid = waker_pid), which bounds the keys at threads x
-- processes rather than threads x threads.
-- Since 2026-12-05 (schema unchanged) only main threads' waits are recorded (tid = pid: what the
-- critical-path model reads); other threads have no thread_wait rows. Older files keep theirs.
-- v2/v3 stored the table thread_wait (interval, tid, state TEXT, waker_pid, waker_tid, ns, count);
-- v4 stores thread_wait_packed, state as a code: 1 "sleep", 2 "io", 3 "other" (threadpack.py).
-- v2: CPU samples of workload threads per interval x thread x subcategory (the per-thread view
-- of cpu_category's per-process samples).
-- v2/v3 stored the table thread_category (interval, tid, subcategory TEXT, samples); v4 stores
-- thread_category_packed, the subcategory as its subcategories.subcategory_id.
-- v4: one row per interval for each: rows packs the interval's tuples in the order written
-- (dpuprof/recording/threadpack.py has each table's fields and codings).
""" + threadpack.DDL + """
-- v2: collective operations (uprobes on the collective library): op ("allreduce", ...), count of
-- calls that ended in the interval, bytes of payload per rank, duration_ns summed.
CREATE TABLE IF NOT EXISTS collectives (
    interval INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL, op TEXT NOT NULL,
    count INTEGER NOT NULL, bytes INTEGER NOT NULL, duration_ns INTEGER NOT NULL);
-- v2: one row per marker hit and its unix time t: kind "step" (dpuprof.mark_step(): a training
-- step began) or "ddp_step" (DDP's per-iteration c10d::Reducer::prepare_for_backward, one per
-- synchronised forward). Use "step" where present: a DDP job that also marks has both.
CREATE TABLE IF NOT EXISTS markers (
    pid INTEGER NOT NULL, tid INTEGER NOT NULL, kind TEXT NOT NULL, t REAL NOT NULL);
-- v2: cipher and codec calls (uprobes): lib ("libcrypto", "libz", ...), func, direction
-- ("encrypt", "decrypt", "compress", "decompress"), calls, input bytes, duration_ns summed (wall
-- time from entry to return) and cpu_ns (the calling thread's on-CPU time within the calls).
CREATE TABLE IF NOT EXISTS codec_calls (
    interval INTEGER NOT NULL, pid INTEGER NOT NULL, lib TEXT NOT NULL, func TEXT NOT NULL,
    direction TEXT NOT NULL, calls INTEGER NOT NULL, bytes INTEGER NOT NULL, duration_ns INTEGER NOT NULL,
    cpu_ns INTEGER NOT NULL);
"""

#: Tables the reader exposes as DataFrames, with their columns. ``stacks`` is assembled from the
#: stored ``stacks`` and ``frames`` tables, with ``folded`` in place of ``frame_ids``.
TABLES = {
    "intervals": ("interval", "t_start", "t_end"),
    "processes": ("pid", "ppid", "comm", "cmdline", "in_workload", "first_seen", "last_seen"),
    "cpu_category": ("interval", "pid", "category", "subcategory", "samples", "cpu_s"),
    "stacks": ("stack_id", "folded", "category", "subcategory", "cause"),
    "stack_samples": ("interval", "pid", "stack_id", "samples"),
    "softirq": ("interval", "cpu", "vector", "time_ns", "count"),
    "block_io": ("interval", "dev", "op", "bytes", "ios"),
    "block_latency": ("interval", "op", "le_us", "count"),
    "net_io": ("interval", "dev", "direction", "bytes", "packets"),
    "sock_io": ("interval", "pid", "protocol", "direction", "bytes", "calls"),
    "events": ("interval", "event", "count"),
    "proc_cpu": ("interval", "pid", "user_s", "system_s"),
    "host_cpu": ("interval", "field", "seconds"),
    "host_disk": ("interval", "read_bytes", "write_bytes", "read_count", "write_count"),
    "host_net": ("interval", "dev", "bytes_sent", "bytes_recv", "packets_sent", "packets_recv"),
    "gpu": ("interval", "gpu_index", "util_pct", "mem_used_bytes"),
    "gpu_process": ("interval", "gpu_index", "pid", "sm_util_pct", "mem_used_bytes"),
    "lost": ("interval", "kind", "count"),
    "probe_cost": ("interval", "program", "runs", "run_ns"),
    "recorder_cpu": ("interval", "user_s", "system_s"),
    "threads": ("tid", "pid", "comm", "first_seen", "last_seen"),
    "thread_time": ("interval", "tid", "on_cpu_ns", "runq_ns", "off_cpu_ns"),
    "thread_wait": ("interval", "tid", "state", "waker_pid", "waker_tid", "ns", "count"),
    "thread_category": ("interval", "tid", "subcategory", "samples"),
    "collectives": ("interval", "pid", "tid", "op", "count", "bytes", "duration_ns"),
    "markers": ("pid", "tid", "kind", "t"),
    "codec_calls": ("interval", "pid", "lib", "func", "direction", "calls", "bytes", "duration_ns", "cpu_ns"),
}

#: Columns added to a table after files with the table were written: the reader gives them as
#: missing (NaN / "") where a file lacks them. ``TABLES`` lists a table's columns without these.
LATE_COLUMNS = {"processes": ("ns_pid", "cgroup"), "gpu": ("mem_total_bytes",), "intervals": ("waits_s",)}

#: The schema version that added a table; a file of an older version reads it as empty.
SINCE = {name: 2 for name in ("threads", "thread_time", "thread_wait", "thread_category", "collectives",
                              "markers", "codec_calls")}
SINCE["gpu_process"] = 3
SINCE["probe_cost"] = SINCE["recorder_cpu"] = 5

def _byte(at: str, h: str = "h") -> str:
    """SQL for the byte at 0-based offset ``at`` of blob ``h``, as an integer (SQLite has no
    byte-to-integer function; instr() on its two hex digits makes one). substr() of a blob counts
    bytes from its start directly, where substr() of text would scan characters: a step costs
    the same at any offset."""
    return (f"(instr('0123456789ABCDEF', substr(hex(substr({h}, ({at}) + 1, 1)), 1, 1)) * 16"
            f" + instr('0123456789ABCDEF', substr(hex(substr({h}, ({at}) + 1, 1)), 2, 1)) - 17)")


_VALUE = "(CASE WHEN done THEN 0 ELSE acc END * 128 + (b & 127))"


def _unpack(name: str, table: str, keys: str, blob: str, extra: tuple[str, str, str] = ("", "", "")) -> str:
    """A recursive CTE ``name`` reading the packed ``blob`` of each ``table`` row one byte per step
    (``b`` the next byte): its rows with ``done AND pos > 0`` are the values, ``acc`` the value and
    ``k`` its index. ``extra``: (column, seed, step) SQL of one more carried column."""
    col, seed, step = (", " + x if x else "" for x in extra)
    return (f"{name}({keys}, h, pos, acc, done, k, b{col}) AS (\n"
            f"    SELECT {keys}, {blob}, 0, 0, 1, -1, {_byte('0', blob)}{seed} FROM {table}\n"
            f"    UNION ALL\n"
            f"    SELECT {keys}, h, pos + 1, {_VALUE}, b < 128, k + (b < 128), {_byte('pos + 1')}{step}\n"
            f"    FROM {name} WHERE pos < length(h))")


_FOLD = ("folded", "''", f"CASE WHEN b < 128 THEN folded || CASE WHEN k >= 0 THEN ';' ELSE '' END || "
                         f"coalesce((SELECT name FROM frames WHERE frame_id = {_VALUE}), '?') ELSE folded END")

#: Views created in every v3 file (v4: and the per-thread views of threadpack.py), so SQL in the
#: sqlite3 CLI needs no blob decoding
#: (docs/recording.md has example queries). cpu_category, stacks and stack_samples have the
#: columns the v1/v2 tables of those names had (stacks with folded text in place of frame_ids),
#: so a query written for an older file runs on a new one.
VIEWS = f"""
-- The frames of each stack, depth 0 the root: stack_list.frames unpacked.
CREATE VIEW IF NOT EXISTS v_stack_frames (stack_id, depth, frame_id, name) AS
WITH RECURSIVE {_unpack("u", "stack_list", "stack_id", "frames")}
SELECT u.stack_id, u.k, u.acc, f.name FROM u LEFT JOIN frames f ON f.frame_id = u.acc
WHERE u.done AND u.pos > 0;
-- Samples per interval x process x stack, as v1/v2 stored them: stack_counts unpacked.
CREATE VIEW IF NOT EXISTS stack_samples (interval, pid, stack_id, samples) AS
WITH RECURSIVE {_unpack("u", "stack_counts", "interval, pid", "counts")}
SELECT interval, pid, max(CASE WHEN k % 2 = 0 THEN acc END), max(CASE WHEN k % 2 = 1 THEN acc END)
FROM u WHERE done AND pos > 0 GROUP BY interval, pid, k / 2;
-- Each stack as folded text (frame names joined with ';', root first) and its classification:
-- the same unpacking, appending each frame's name as its last byte is read.
CREATE VIEW IF NOT EXISTS v_stacks (stack_id, folded, category, subcategory, cause, depth) AS
WITH RECURSIVE {_unpack("u", "stack_list", "stack_id", "frames", _FOLD)}
SELECT s.stack_id, u.folded, c.category, c.subcategory, s.cause, u.k + 1
FROM u JOIN stack_list s USING (stack_id) JOIN subcategories c USING (subcategory_id)
WHERE u.pos = length(u.h);
CREATE VIEW IF NOT EXISTS stacks (stack_id, folded, category, subcategory, cause) AS
SELECT stack_id, folded, category, subcategory, cause FROM v_stacks;
-- CPU per interval x process x subcategory, as v1/v2 stored it: cpu_counts unpacked.
CREATE VIEW IF NOT EXISTS cpu_category (interval, pid, category, subcategory, samples, cpu_s) AS
WITH RECURSIVE {_unpack("u", "cpu_counts", "interval", "counts")},
t(interval, pid, subcategory_id, samples, cpu_ns) AS (
    SELECT interval, max(CASE WHEN k % 4 = 0 THEN acc END), max(CASE WHEN k % 4 = 1 THEN acc END),
           max(CASE WHEN k % 4 = 2 THEN acc END), max(CASE WHEN k % 4 = 3 THEN acc END)
    FROM u WHERE done AND pos > 0 GROUP BY interval, k / 4)
SELECT t.interval, t.pid, c.category, c.subcategory, t.samples, t.cpu_ns / 1e9
FROM t JOIN subcategories c USING (subcategory_id);
CREATE VIEW IF NOT EXISTS v_cpu_by_category (interval, pid, comm, category, subcategory, cpu_s, samples) AS
SELECT t.interval, t.pid, p.comm, t.category, t.subcategory, t.cpu_s, t.samples
FROM cpu_category t LEFT JOIN processes p ON p.pid = t.pid;
CREATE VIEW IF NOT EXISTS v_stack_samples (interval, pid, comm, stack_id, category, subcategory, cause, samples) AS
SELECT ss.interval, ss.pid, p.comm, ss.stack_id, c.category, c.subcategory, s.cause, ss.samples
FROM stack_samples ss JOIN stack_list s USING (stack_id) JOIN subcategories c USING (subcategory_id)
LEFT JOIN processes p ON p.pid = ss.pid;
-- Each process with its CPU over the whole recording.
CREATE VIEW IF NOT EXISTS v_processes (pid, ppid, comm, cmdline, in_workload, first_seen, last_seen, cpu_s, samples) AS
SELECT p.pid, p.ppid, p.comm, p.cmdline, p.in_workload, p.first_seen, p.last_seen,
       coalesce(t.cpu_s, 0), coalesce(t.samples, 0)
FROM processes p LEFT JOIN (SELECT pid, sum(cpu_s) AS cpu_s, sum(samples) AS samples FROM cpu_category
                            GROUP BY pid) t ON t.pid = p.pid;
""" + threadpack.view_sql(_unpack)
