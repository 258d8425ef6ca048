"""``dshpy-runtime --patch``: the session store of dsh's JSONL persistence row, read from the SDK's patch lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from dshpy.server.dsh_patches import PatchError, read_patch_list, store_from_patches


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_sdk_fixtures_plain_patch(tmp_path: Path) -> None:
    patch = _write(
        tmp_path,
        "plain.patch.yml",
        "# Store sessions as plain JSONL instead of the default zstd.\n"
        "- id: session-persistence-jsonl\n"
        "  config:\n"
        f'    root: "{tmp_path}/sessions"\n'
        "    compression: none\n",
    )
    assert read_patch_list(patch) == [
        {"id": "session-persistence-jsonl", "config": {"root": f"{tmp_path}/sessions", "compression": "none"}}
    ]
    patched = store_from_patches([patch])
    assert patched.url == f"jsonl:///{tmp_path}/sessions?compression=none" and patched.ignored == ()


def test_yaml_subset_json_order_and_other_rows(tmp_path: Path) -> None:
    first = _write(
        tmp_path,
        "a.yml",
        "---\n"
        "- id: telemetry   # a dsh plugin\n"
        "  disabled: true\n"
        "- id: 'session-persistence-jsonl'\n"
        "  config:\n"
        "    root: relative/root  # relative to the runtime's cwd, as dsh resolves it\n"
        "    listConcurrency: 3\n"
        "- insert:\n"
        "    - name: ./plugin.js\n",
    )
    second = _write(
        tmp_path,
        "b.json",
        '[{"id": "session-persistence-jsonl", "config": {"root": "/srv/dsh", "compression": "zstd"}}]',
    )
    only_first = store_from_patches([first])
    assert only_first.url is not None and only_first.url.endswith("/relative/root?compression=zstd")
    assert only_first.ignored == ((str(first), "telemetry"), (str(first), "(insert)"))
    assert store_from_patches([first, second]).url == "jsonl:////srv/dsh?compression=zstd"
    assert store_from_patches([]).url is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- id: session-persistence-jsonl\n  config:\n    compression: none\n", "needs a root"),
        ("- id: session-persistence-jsonl\n  config:\n    root: /x\n    compression: lz4\n", "zstd or none"),
        ("- id: session-persistence-jsonl\n  disabled: true\n", "always stores its sessions"),
        ("- id: session-persistence-jsonl\n  config:\n    root: !!js 'home() + \"/s\"'\n", "line 3: '!!js'"),
        ("- id: x\n  config: {a: 1}\n", "flow collections must be JSON"),
        ("id: not-a-list\n", "must be a list of entries"),
        ("- id: x\n    bad: indent\n", "line 2"),
    ],
)
def test_what_dshpy_cannot_follow_is_refused_by_name(tmp_path: Path, text: str, message: str) -> None:
    patch = _write(tmp_path, "p.yml", text)
    with pytest.raises(PatchError, match=message.replace("(", r"\(").replace("+", r"\+")) as refused:
        store_from_patches([patch])
    assert str(patch) in str(refused.value)


def test_a_missing_patch_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="cannot read dsh patch"):
        store_from_patches([tmp_path / "absent.yml"])
