# Sourced by the bench scripts: libfuse's own examples, the FUSE references
# (passthrough_ll, null), built from the sources Debian's libfuse3-dev ships
# (possibly gzipped).  The caller defines die MESSAGE.

# build_fuse_ref NAME DIR: build the example NAME into DIR/NAME
build_fuse_ref() {
	local ex=/usr/share/doc/libfuse3-dev/examples f
	mkdir -p "$2"
	for f in "$1.c" passthrough_helpers.h; do
		if [ -f "$ex/$f" ]; then cp "$ex/$f" "$2/$f"
		elif [ -f "$ex/$f.gz" ]; then gzip -dc "$ex/$f.gz" >"$2/$f"
		elif [ "$f" = "$1.c" ]; then die "$ex/$1.c is missing (apt-get install libfuse3-dev)"
		fi
	done
	# shellcheck disable=SC2046
	cc -O2 -Wall "$2/$1.c" $(pkg-config fuse3 --cflags --libs) -lpthread -o "$2/$1" \
		>"$2/$1.log" 2>&1 || { cat "$2/$1.log" >&2; die "cannot build libfuse's $1 example"; }
}
