# The kubelet's part of examples_test.sh, sourced by it: a rendered pod's volumes as the
# kubelet makes them, and its containers started as the kubelet starts them. It reads the
# caller's: here (the tests' folder), rendered and rq (the rendering), objects (Trainer's Secret and ConfigMap),
# fs_group, as_pod_user (setpriv's arguments for the pod's uid), image_path, image_root, CIB,
# CIB_DIR and TMPI_BUILD_DIR.
# The volumes: an emptyDir root-owned, group fsGroup, 2777; a Secret's or ConfigMap's files
# root-owned, group fsGroup, the rendered modes plus group read, behind ..data, as the
# kubelet's atomic writer lays them out.

# spec POD [CONTAINER]: pod_command.py's JSON for that pod (its volumes) or container.
spec() {
  python3 "$here/../examples/pod_command.py" "$rendered" "$@" \
    --home "$CIB_DIR/pods/$1/home" --volumes "$CIB_DIR/pods/$1/volumes" || fail "pod_command.py $*"
}
stamp="..$(date -u +%Y_%m_%d_%H_%M_%S.%N)"
make_volumes() {
  local name dir source key path mode
  while IFS=$'\t' read -r name dir source key path mode; do
    mkdir -p "$dir"
    chown "0:$fs_group" "$dir"
    if [[ -z $key ]]; then chmod 2777 "$dir"; continue; fi  # an emptyDir, as the kubelet makes it
    [[ -f $objects/$source/$key ]] || fail "$1: volume $name shows $source's $key, which Trainer does not make"
    mkdir -p "$dir/$stamp"; chown "0:$fs_group" "$dir/$stamp"; chmod 2755 "$dir" "$dir/$stamp"
    install -g "$fs_group" -m "$(printf %o $((mode | 0440)))" "$objects/$source/$key" "$dir/$stamp/$path"
    ln -sfn "$stamp" "$dir/..data"; ln -sfn "..data/$path" "$dir/$path"; chown -h "0:$fs_group" "$dir/..data" "$dir/$path"
  done < <(spec "$1" | jq -r '.volumes[] | if .kind == "emptyDir" or .kind == "persistentVolumeClaim" then [.name, .dir]
                               else . as $v | .files[] | [$v.name, $v.dir, $v.source, .key, .path, .mode] end | @tsv')
}

# A sanitized build's programs under nss_wrapper: it dlopens libc with RTLD_DEEPBIND, which
# ASan refuses at once ("incompatible with sanitizer runtime"), unless told not to. Only the
# test build needs this; the image's programs are not sanitized.
sanitizer_env=()
[[ ${TMPI_SANITIZED:-OFF} != ON ]] || sanitizer_env=(NSS_WRAPPER_DISABLE_DEEPBIND=1)
# trainer-mpi's image holds the bundle at /opt/trainer-mpi (images/Dockerfile): the init
# container `bundle` copies it from there into the pods' volume, and the sidecars run from it.
# Pods without an image run on the host's root, where this build's bundle stands for it.
our_bundle=/opt/trainer-mpi
[[ -n ${image_root:-} ]] || our_bundle=$TMPI_BUILD_DIR/trainer-mpi
[[ -n ${image_root:-} || -f $our_bundle/MANIFEST ]] || fail "no bundle in $our_bundle: build first (the target bundle)"
# start_pod POD: as the kubelet: its init containers in order, a native sidecar left running,
# then its main container; their pids in pid[POD/CONTAINER], their output in the pod's folder.
declare -A pid
start_pod() {
  local name kind log json
  make_volumes "$1"
  while read -r name kind; do
    json=$(spec "$1" "$name"); log="$CIB_DIR/pods/$1/$name.log"
    local -a argv env_pairs
    mapfile -d '' argv < <(jq -j '.argv[] + "\u0000"' <<<"$json")
    mapfile -d '' env_pairs < <(jq -j '.env | to_entries[] | "\(.key)=\(.value)\u0000"' <<<"$json")
    argv=("${argv[@]/#\/opt\/trainer-mpi\//$our_bundle/}")
    local -a cmd=("$CIB" exec "$1" -- "${as_pod_user[@]}" env -i HOME="$CIB_DIR/pods/$1/home" HOSTNAME="$1" PATH="$image_path"
                  "${sanitizer_env[@]}"
                  "${env_pairs[@]}" "${argv[@]}")
    if [[ $kind == init ]]; then
      "${cmd[@]}" > "$log" 2>&1 </dev/null || fail "$1: init container $name exited $?: $(cat "$log")"
    else
      "${cmd[@]}" > "$log" 2>&1 </dev/null & pid[$1/$name]=$!
    fi
  done < <(rq --arg h "$1" '.pods[] | select(.spec.hostname == $h) | .spec |
             (.initContainers[]? | "\(.name) \(if .restartPolicy == "Always" then "sidecar" else "init" end)"),
             (.containers[] | "\(.name) main")')
}
# ended PID SECONDS: whether that child process ends within SECONDS.
ended() {
  local deadline=$((SECONDS + $2)) state
  while state=$(ps -o stat= -p "$1") && [[ $state != Z* ]]; do (( SECONDS < deadline )) || return 1; sleep 0.2; done
}
sidecars() { rq --arg h "$1" '.pods[] | select(.spec.hostname == $h) | .spec.initContainers[]? |
                               select(.restartPolicy == "Always") | .name'; }
