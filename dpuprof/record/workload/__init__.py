"""The workload and its processes: the command, attached targets, /proc, privileges, output names."""
