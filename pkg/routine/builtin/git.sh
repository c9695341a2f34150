#!/usr/bin/env bash
# Built-in decree hook: @NAME@
#
# git-baseline (beforeEach) records the working tree before each attempt as
# a commit under refs/decree/<message-id>/baseline-<attempt>.
# git-stash-changes (afterEach) keeps what the attempt left as the stash
# entry "decree/<message-id>/attempt-<N>", based on that baseline, so
# `git stash show -p` shows the attempt's own changes. Neither touches the
# working tree, the index or HEAD: reverting is decree's job (checkpoints).
# Untracked files are included, ignored files and .decree/ are not. Outside
# a git repository (or without git) the hook notes it and succeeds. Put a
# file of the same name in .decree/routines/ to replace this one.
set -euo pipefail

message_id="${message_id:-}"

hook_name="@NAME@"
attempt="${DECREE_ATTEMPT:-1}"

note() { echo "decree: $hook_name: $*"; }

if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then
  command -v git >/dev/null 2>&1 || note "git is not on PATH; the hook will only note that it skipped"
  exit 0
fi
if [ -z "${DECREE_HOOK:-}" ]; then
  echo "decree: $hook_name is a hook, not a routine for messages; name it under hooks: in .decree/config.yml" >&2
  exit 2
fi
if [ -z "$message_id" ]; then
  note "runs around message attempts (beforeEach/afterEach), not as ${DECREE_HOOK}; nothing recorded"
  exit 0
fi
if ! command -v git >/dev/null 2>&1; then
  note "git is not on PATH; nothing recorded"
  exit 0
fi
if [ "$(git rev-parse --is-inside-work-tree 2>/dev/null || true)" != "true" ]; then
  note "$(pwd) is not in a git repository; nothing recorded"
  exit 0
fi

# Commits need an identity; use decree's when the repository has none.
if [ -z "$(git config user.email || true)" ]; then
  export GIT_AUTHOR_NAME="${GIT_AUTHOR_NAME:-decree}" GIT_AUTHOR_EMAIL="${GIT_AUTHOR_EMAIL:-decree@localhost}"
  export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-decree}" GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-decree@localhost}"
fi

# worktree_tree prints the tree of the working directory as `git add -A`
# would stage it (untracked files in, ignored files and .decree/ out),
# using a scratch index so the real one is left alone. The copy keeps the
# index's mtime (cp -p): git trusts a file whose size and mtime match its
# index entry only when that mtime is older than the index file itself,
# so a copy with a new mtime would hide a same-size edit made in the
# instant the index was written.
worktree_tree() {
  local scratch real
  scratch="$(mktemp "${TMPDIR:-/tmp}/decree-index.XXXXXX")"
  real="$(git rev-parse --git-path index)"
  if [ -f "$real" ]; then cp -p "$real" "$scratch"; else rm -f "$scratch"; fi
  GIT_INDEX_FILE="$scratch" git add -A -- . ':(exclude).decree' >/dev/null
  GIT_INDEX_FILE="$scratch" git write-tree
  rm -f "$scratch"
}

# base_commit prints HEAD, or a commit of the empty tree in a repository
# without commits.
base_commit() {
  git rev-parse --verify -q HEAD || git commit-tree "$(git hash-object -t tree /dev/null)" -m "decree: empty base"
}

baseline_ref="refs/decree/${message_id}/baseline-${attempt}"
case "$hook_name" in
git-baseline)
  commit="$(git commit-tree "$(worktree_tree)" -p "$(base_commit)" -m "decree/${message_id}/baseline-${attempt}")"
  git update-ref "$baseline_ref" "$commit"
  note "recorded the tree before attempt ${attempt} of ${message_id} as ${baseline_ref}"
  ;;
git-stash-changes)
  base="$(git rev-parse --verify -q "$baseline_ref" || base_commit)"
  name="decree/${message_id}/attempt-${attempt}"
  index_tree="$(git write-tree 2>/dev/null || git rev-parse "${base}^{tree}")"
  index_commit="$(git commit-tree "$index_tree" -p "$base" -m "index on ${name}")"
  commit="$(git commit-tree "$(worktree_tree)" -p "$base" -p "$index_commit" -m "$name")"
  git stash store -m "$name" "$commit"
  note "kept attempt ${attempt} of ${message_id} (exit ${DECREE_ROUTINE_EXIT_CODE:-?}) as stash \"${name}\"; see it with: git stash list | grep ${name}"
  ;;
*)
  echo "decree: unknown built-in git hook $hook_name" >&2
  exit 2
  ;;
esac
