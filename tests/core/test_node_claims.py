"""Two machines claiming one node name in one cluster: detected (sql/node_claims.sql) and reported by
`gpuledger analyze`, not silently merged into one node (issue 16, bad input).

The hand-built lake, Nov 2 2026 (UTC):
- eu-1 gpu-7: two machines, A (GPU-a0 at index 0, GPU-a1 at 1) sampled at :00 of each minute and B (GPU-b0, GPU-b1
  at the same indexes) at :30, from 10:00 to 10:14: two GPUs at one index in the buckets 10:00, 10:05 and 10:10.
- eu-1 gpu-8: one machine whose GPU at index 0 was swapped (GPU-old to 10:09, GPU-new from 10:40): no claim.
- eu-1 gpu-9: one machine read by two sources (nvml and dcgm report the same GPU): no claim.
- us-1 gpu-7: another cluster's node of the same name, with its own GPU at index 0 at the same times: no claim.
"""

import datetime as dt

from gpuledger.query import Lake

from builders import at, epoch_us, write_rows


def _samples(cluster, node, gpus: dict[str, int], minutes, second=0, source="nvml") -> list[dict]:
    return [
        {
            "ts": epoch_us(at(2, 10, m, second)),
            "cluster": cluster,
            "node": node,
            "gpu_uuid": uuid,
            "gpu_index": index,
            "source": source,
        }
        for m in minutes
        for uuid, index in gpus.items()
    ]


def _lake(path):
    rows = (
        _samples("eu-1", "gpu-7", {"GPU-a0": 0, "GPU-a1": 1}, range(15))
        + _samples("eu-1", "gpu-7", {"GPU-b0": 0, "GPU-b1": 1}, range(15), second=30)
        + _samples("eu-1", "gpu-8", {"GPU-old": 0}, range(10))
        + _samples("eu-1", "gpu-8", {"GPU-new": 0}, range(40, 50))
        + _samples("eu-1", "gpu-9", {"GPU-d0": 0}, range(15))
        + _samples("eu-1", "gpu-9", {"GPU-d0": 0}, range(15), second=15, source="dcgm")
        + _samples("us-1", "gpu-7", {"GPU-c0": 0}, range(15), second=45)
    )
    write_rows(path, "gpu_samples", rows)
    return path


def test_the_view_names_the_node_two_machines_claim(tmp_path):
    lake = _lake(tmp_path / "lake")
    with Lake(lake) as q:
        rows = q.execute("SELECT * FROM node_claims").rows
    assert rows == [
        (
            "eu-1",
            "gpu-7",
            dt.date(2026, 11, 2),
            at(2, 10, 0),
            at(2, 10, 15),
            3,
            ["GPU-a0", "GPU-a1", "GPU-b0", "GPU-b1"],
        )
    ]


def _claimed(caplog) -> list[str]:
    return [m for m in caplog.messages if "claimed by two machines" in m]


def test_analyze_reports_it_in_one_line_for_its_own_cluster(cli, tmp_path, caplog):
    lake = _lake(tmp_path / "lake")
    lines = {}
    for cluster in ("eu-1", "us-1"):
        config = tmp_path / f"{cluster}.toml"
        config.write_text(f'cluster = "{cluster}"\n')
        caplog.clear()
        r = cli(
            "analyze",
            "--lake",
            lake,
            "--config",
            config,
            "--to",
            "2026-11-02T12:00:00Z",
            "--from",
            "2026-11-02T00:00:00Z",
        )
        assert r.exit_code == 0, r.output
        lines[cluster] = _claimed(caplog)
    assert lines == {
        "eu-1": [
            "analytics: node 'gpu-7' of cluster 'eu-1' is claimed by two machines: GPUs GPU-a0, GPU-a1, GPU-b0, "
            "GPU-b1 report at the same GPU index from 2026-11-02 10:00 to 2026-11-02 10:15 UTC; give each collector "
            "its own collector.node (its rows are merged into one node until then)"
        ],
        "us-1": [],
    }


def test_a_run_reports_the_hours_it_analysed_only(cli, tmp_path, caplog):
    """The check is part of the pass over raw samples: a later run whose window starts after the clash says
    nothing of it, and a late file that brings a clash into a day already analysed is reported with the hours it
    makes the run analyse again."""
    lake = _lake(tmp_path / "lake")
    config = tmp_path / "eu-1.toml"
    config.write_text('cluster = "eu-1"\n')
    assert cli("analyze", "--lake", lake, "--config", config, "--to", "2026-11-02T11:00:00Z").exit_code == 0
    assert len(_claimed(caplog)) == 1
    caplog.clear()
    assert cli("analyze", "--lake", lake, "--config", config, "--to", "2026-11-02T14:00:00Z").exit_code == 0
    assert _claimed(caplog) == []
    late = _samples("eu-1", "gpu-5", {"GPU-e0": 0}, range(5)) + _samples("eu-1", "gpu-5", {"GPU-f0": 0}, [2])
    write_rows(lake, "gpu_samples", late, "late")
    assert cli("analyze", "--lake", lake, "--config", config, "--to", "2026-11-02T15:00:00Z").exit_code == 0
    # The late file's hours are analysed again from its first sample (10:00), gpu-7's clash with them.
    assert [m[:35] for m in _claimed(caplog)] == [
        "analytics: node 'gpu-5' of cluster ",
        "analytics: node 'gpu-7' of cluster ",
    ]
    assert _claimed(caplog)[0] == (
        "analytics: node 'gpu-5' of cluster 'eu-1' is claimed by two machines: GPUs GPU-e0, GPU-f0 report at the "
        "same GPU index from 2026-11-02 10:00 to 2026-11-02 10:05 UTC; give each collector its own collector.node "
        "(its rows are merged into one node until then)"
    )


def test_clashes_and_claims_follow_the_views_rule(tmp_path):
    """The run's rule (analytics/node_claims.py, on 5-minute rows) gives the view's answer on the same lake."""
    from gpuledger.analytics.gpu_hourly import gpu_5min
    from gpuledger.analytics.node_claims import NodeClaim, claims, clashes
    from gpuledger.lake import scan

    lake = _lake(tmp_path / "lake")
    found = clashes(gpu_5min(scan(lake, "gpu_samples"), index=True).collect())
    assert found.select("cluster", "node", "bucket_start").rows() == [
        ("eu-1", "gpu-7", at(2, 10, 0)),
        ("eu-1", "gpu-7", at(2, 10, 5)),
        ("eu-1", "gpu-7", at(2, 10, 10)),
    ]
    claim = NodeClaim("eu-1", "gpu-7", at(2, 10, 0), at(2, 10, 15), ("GPU-a0", "GPU-a1", "GPU-b0", "GPU-b1"))
    assert claims(found, "eu-1") == [claim]
    assert claims(found, "us-1") == []
    assert claims(found.clear(), "eu-1") == []
