# Shared by .ci/run and .ci/extended (sourced, not run).
# step TEXT: prints the step's name and the time it starts.
step() { echo "==> ci: $* ($(date -u +%H:%M:%S))"; }
# limited MINUTES NAME COMMAND...: runs COMMAND, killed (the whole process group) after MINUTES.
limited() {
    local minutes=$1 name=$2 status=0
    shift 2
    timeout --kill-after=30s "${minutes}m" "$@" || status=$?
    if ((status == 124 || status == 137)); then
        echo "==> ci: FAILED: $name did not finish within $minutes minutes" >&2
    fi
    return "$status"
}
