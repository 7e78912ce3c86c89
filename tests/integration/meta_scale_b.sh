#!/bin/bash
# meta_scale.sh part (b) alone (one meson test per part keeps each under
# the CI time budget); see meta_scale.sh for what it checks and the env.
export ZF_META_PARTS=b ZF_TEST=meta_scale_b
exec bash "$(dirname "$0")/meta_scale.sh" "$@"
