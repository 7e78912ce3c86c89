# Sourced by scripts/bench-placement.sh and scripts/bench-steady.sh: the
# RocksDB settings of the placement benchmarks, sized for a 2 GiB device
# (bench-placement.sh's header says why): 400-byte values, 4 MiB write
# buffer, 8 MiB tables, 32 MiB L1, L0 slowdown/stop at 8/12 files.
# shellcheck disable=SC2034
placement_rocks=(--compression_type=none --value_size=400 --key_size=16
	--write_buffer_size=4194304 --target_file_size_base=8388608
	--max_bytes_for_level_base=33554432
	--level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12
	--seed=42 --threads=1)
