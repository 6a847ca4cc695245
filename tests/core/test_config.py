import dataclasses
import datetime as dt
import re

import pytest

from gpuledger import config
from gpuledger.config_keys import sections
from gpuledger.errors import ConfigError

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "config"


def test_defaults_describe_a_usable_fleet():
    cfg = config.load(None)
    assert cfg.cluster == "default"
    assert {t.name for t in cfg.tenants} == {"vision", "nlp", "recsys", "research", "platform"}
    assert cfg.tenant_of_namespace()["notebooks"] == "platform"
    assert all(r.usd_per_gpu_hour > 0 for r in cfg.rates)


def test_good_config_is_parsed_into_typed_values():
    cfg = config.load(FIXTURES / "good.toml")
    assert cfg.cluster == "prod-eu"
    assert cfg.lake.path == FIXTURES / "data"  # relative paths are relative to the config file
    assert cfg.collector.interval_s == 5.0 and cfg.collector.sources == ("sim",)
    vision = cfg.tenants[0]
    assert vision.name == "vision" and vision.namespaces == ("vision-train", "vision-dev")
    assert vision.weight == 3.0 and vision.quota == {"NVIDIA H100 80GB HBM3": 32, "*": 48}
    assert vision.budget_usd_per_month == 50000.0 and vision.budget_gpu_hours_per_month == 20000.0
    assert cfg.tenants[1].budget_usd_per_month is None
    assert cfg.rates[1] == config.Rate("NVIDIA H100 80GB HBM3", 2.1, dt.datetime(2026, 7, 1, tzinfo=dt.timezone.utc))
    assert cfg.rates[2].effective_from == dt.datetime(2026, 9, 1, 12, tzinfo=dt.timezone.utc)  # mid-day change
    assert cfg.simulator.models == ("H100", "L4")


def test_readme_example_config_is_valid():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", readme, re.S).group(1)
    import tomllib

    cfg = config.parse(tomllib.loads(block), "README.md")
    assert cfg.tenants and cfg.rates


def test_readme_example_names_only_declared_keys_commented_ones_too():
    """The example's commented-out keys (`# spool_dir = ...`) are not parsed above: each must still be declared."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```toml\n(.*?)```", readme, re.S).group(1)
    classes = {name: cls for name, cls, _ in sections(config.Config)} | {"tenants": config.Tenant, "rates": config.Rate}
    classes["accelerators"] = config.AcceleratorResource
    table, seen = "", 0
    for line in block.splitlines():
        if m := re.match(r"\[\[?([\w.]+)\]?\]", line):
            table = m[1]
        elif (m := re.match(r"#? ?(\w+) = ", line)) and "." not in table:  # [tenants.quota] keys are GPU models
            assert m[1] in config.allowed(classes[table] if table else config.Config), f"[{table}] {m[1]}"
            seen += 1
    assert seen > 30


# (file, fragments every one of which must appear in the message)
BAD = [
    (
        "bad_accelerators.toml",
        [
            "accelerators[0].vendor: must be one of nvidia, amd, huawei, got 'intel'",
            "accelerators[1].share: must be in (0, 1], got 1.5",
            "accelerators[2].resource: 'memory' is not an extended resource name (domain/name)",
            "accelerators[4].resource: 'amd.com/cpx_nps4' is mapped twice",
        ],
    ),
    ("bad_unknown_key.toml", ["collector.intervall_s: unknown key"]),
    ("bad_type.toml", ["collector.interval_s: expected", "got str '10'"]),
    (
        "bad_negative_quota.toml",
        [
            "tenants[0] (vision).quota.*: must be >= 0, got -4",
            "tenants[0] (vision).budget.gpu_hours_per_month: must be > 0 (leave it out for no budget), got -10",
        ],
    ),
    ("bad_duplicate_tenant.toml", ["duplicate tenant name(s): vision"]),
    ("bad_namespace_twice.toml", ["namespace 'shared' already belongs to tenant 'a'"]),
    ("bad_unknown_source.toml", ["collector.sources[1]: unknown source 'nvidia'"]),
    ("bad_no_source.toml", ["collector.sources: must list at least one source (registered: amd, ascend, dcgm, k8s,"]),
    ("bad_rate_missing_date.toml", ["rates[0].effective_from: missing"]),
    ("bad_toml_syntax.toml", ["not valid TOML"]),
    (
        "bad_interval_floor.toml",
        [
            "bad_interval_floor.toml: collector.interval_s: must be at least 0.01 (the floor), got 0.001",
            "collector.flush_interval_s: must be at least 0.1 (the floor), got 0.01",
            "collector.process_interval_s: must be at least 0.01 (the floor), got 0",
            "enforcer.refresh_s: must be at least 1 (the floor: each reload reads the lake), got 0.5",
        ],
    ),
    ("bad_finops.toml", ["finops.provider_name: must not be empty", "finops.host_provider: unknown key"]),
    (
        "bad_enforcer.toml",
        [
            "enforcer.quota_mode: must be one of enforce, warn, dry-run, got 'block'",
            "enforcer.max_table_age_s: must be > 0",
            "enforcer.idle_min_h: must be >= 0, got -1",
            "enforcer.tenant_label: must be a Kubernetes label key (prefix/name) or empty, got 'Team Name/x y'",
        ],
    ),
    (
        "bad_not_finite.toml",
        [
            "collector.interval_s: must be a finite number, got inf",
            "simulator.backfill_days: must be a finite number, got nan",
            "analytics.fairshare_half_life_h: must be a finite number, got inf",
            "enforcer.refresh_s: must be a finite number, got nan",
            "enforcer.idle_max_gpus: must be a finite number, got inf",
            "tenants[0] (vision).weight: must be a finite number, got inf",
            "tenants[0] (vision).quota.*: must be a finite number, got nan",
            "tenants[0] (vision).quota.H100: must be a finite number, got inf",
            "tenants[0] (vision).budget.usd_per_month: must be a finite number, got inf",
            "tenants[0] (vision).budget.gpu_hours_per_month: must be a finite number, got nan",
            "rates[0].usd_per_gpu_hour: must be a finite number, got -inf",
        ],
    ),
    (
        "bad_dashboard.toml",
        ["dashboard.port: must be a TCP port", "dashboard.auth_user: set both auth_user and auth_password_env"],
    ),
    (
        "bad_classes.toml",
        [
            "classes[1].class: must be one of training, inference, notebook, evaluation, other, got 'batch'",
            "classes[1].labels.app: must not be empty, got ''",
            "classes[1].labels: 'Bad Key' is not a Kubernetes label key (prefix/name)",
            "classes[2]: needs namespaces or labels (a rule without a selector would match every pod)",
            "classes[3].namespace: unknown key (allowed: class, labels, namespaces)",
            "classes[3].labels.team: expected a string, got int 3",
        ],
    ),
    (
        "bad_many.toml",
        [
            "cluster: must not be empty",
            "simulator.gpus_per_node: must be between 1 and 16",
            "tenants[0].name: missing",
            "rates[0].usd_per_gpu_hour: must be >= 0",
        ],
    ),
]


@pytest.mark.parametrize("name,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_config_names_file_key_and_problem(name, fragments):
    path = FIXTURES / name
    with pytest.raises(ConfigError) as e:
        config.load(path)
    msg = str(e.value)
    assert str(path) in msg
    for f in fragments:
        assert f in msg, msg


def test_every_bad_fixture_is_covered():
    assert {p.name for p in FIXTURES.glob("bad_*.toml")} == {b[0] for b in BAD}


def test_missing_config_file_is_reported():
    with pytest.raises(ConfigError, match="file not found"):
        config.load(FIXTURES / "nope.toml")


@pytest.mark.parametrize("key", ["gpuledger.io/tenant", "team", "example.com/cost-center_1", ""])
def test_tenant_label_takes_any_label_key_or_empty(key):
    cfg = config.parse({"enforcer": {"tenant_label": key, "idle_min_h": 0.5}}, "t.toml")
    assert cfg.enforcer.tenant_label == key and cfg.enforcer.idle_min_h == 0.5


@pytest.mark.parametrize("key", ["Example.com/team", "/team", "team-", "a/b/c", "x" * 64, "a" * 64 + ".io/team"])
def test_tenant_label_rejects_what_kubernetes_rejects(key):
    with pytest.raises(ConfigError, match="enforcer.tenant_label: must be a Kubernetes label key"):
        config.parse({"enforcer": {"tenant_label": key}}, "t.toml")


QUOTAS = """
[[tenants]]
name = "vision"
namespaces = ["v"]
[tenants.quota]
H100 = 4
"NVIDIA-A100-SXM4-80GB" = 2
"*" = 8
[[tenants]]
name = "nlp"
namespaces = ["n"]
[tenants.quota]
H10 = 1
"""


def test_quota_keys_must_name_a_model_of_the_lake():
    import tomllib

    cfg = config.parse(tomllib.loads(QUOTAS), "q.toml")
    lake = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]
    with pytest.raises(ConfigError) as e:
        config.check_quota_models(cfg, lake)
    # Only nlp's H10 (no model has the word H10): H100 by its words, the A100 key by its dashed NVML name.
    assert e.value.problems == [
        "tenants[1] (nlp).quota.H10: names no GPU model in the lake "
        "(known: NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3)"
    ]
    assert str(e.value).splitlines()[1].strip().startswith("q.toml: tenants[1] (nlp).quota.H10: names no GPU model")
    config.check_quota_models(cfg, [])  # an empty lake: nothing to check against yet
    config.check_quota_models(config.defaults(), ["NVIDIA L4"])  # the built-in tenants describe the built-in fleet


@pytest.mark.parametrize(
    "model,keys,want",
    [
        ("NVIDIA H100 80GB HBM3", ["H100", "*"], "H100"),
        ("NVIDIA H100 80GB HBM3", ["H10", "H100 80GB", "H100"], "H100 80GB"),  # the longest that matches
        ("NVIDIA H100 80GB HBM3", ["NVIDIA-H100-80GB-HBM3"], "NVIDIA-H100-80GB-HBM3"),  # a node label's spelling
        ("NVIDIA A100-SXM4-80GB", ["A100", "80GB"], "A100"),  # equal length: the first listed
        ("Tesla T4", ["T4", "*"], "T4"),
        ("NVIDIA L40S", ["L40", "*"], None),
        (None, ["H100"], None),
    ],
)
def test_match_model_is_the_rule_for_rates_and_quotas(model, keys, want):
    assert config.match_model(model, keys) == want


def test_every_field_of_a_config_table_is_a_declared_key():
    """A field without `key(...)` would be neither read from the file nor documented: each one is declared."""
    from gpuledger.config_keys import declared

    classes = [cls for _, cls, _ in sections(config.Config)] + [config.Tenant, config.Rate]
    for cls in classes:
        fields = [f.name for f in dataclasses.fields(cls)]
        assert [f.name for f, _, _ in declared(cls)] == fields, cls.__name__
    # Two fields are not read from the file: where it came from, and the password read from the environment.
    not_keys = {"source_file", "dashboard_password"}
    assert {f.name for f in dataclasses.fields(config.Config)} - not_keys == config.allowed(config.Config)


@pytest.mark.parametrize(
    "bounds,text",
    [
        (dict(gt=0), "> 0"),
        (dict(ge=1), ">= 1"),
        (dict(ge=1, le=16), "between 1 and 16"),
        (dict(gt=0, le=2), "in (0, 2]"),
        (dict(ge=0, lt=1.5), "in [0, 1.5)"),
        (dict(le=100), "<= 100"),
        ({}, ""),
    ],
)
def test_bounds_read_as_they_are_declared(bounds, text):
    from gpuledger.config_keys import Key, bounds_text

    assert bounds_text(Key("doc", **bounds)) == text


def test_declared_types_convert_as_before():
    cfg = config.parse(
        {
            "lake": {"path": "lake"},
            "collector": {"interval_s": 5, "dcgm_urls": ["http://a:9400/metrics"], "spool_dir": ""},
            "tenants": [{"name": "a", "namespaces": ["a"], "weight": 2, "quota": {"*": 3, "H100": 1.5}}],
        },
        "t.toml",
        FIXTURES,
    )
    assert cfg.lake.path == FIXTURES / "lake"  # relative to the config file's folder
    assert cfg.collector.interval_s == 5.0 and isinstance(cfg.collector.interval_s, float)  # an int, made a float
    assert cfg.collector.dcgm_urls == ("http://a:9400/metrics",)  # a list, made a tuple
    assert cfg.collector.spool_dir is None  # "" is the default: <lake>/_spool/<node>
    t = cfg.tenants[0]
    assert t.weight == 2.0 and isinstance(t.weight, float) and t.quota == {"*": 3, "H100": 1.5}
    assert isinstance(t.quota["*"], int)  # a quota is kept as given: 3 GPUs, not 3.0


def test_two_prices_for_one_model_and_date_name_the_rows_as_written():
    """A bad row before them is skipped, but the message still names the rows by their place in the file."""
    price = {"gpu_model": "H100", "effective_from": dt.date(2026, 1, 1)}
    doc = {"rates": [{"gpu_model": 1}, {**price, "usd_per_gpu_hour": 1.0}, {**price, "usd_per_gpu_hour": 2.0}]}
    with pytest.raises(ConfigError) as e:
        config.parse(doc, "f.toml")
    assert (
        "  f.toml: rates: two prices for H100 from 2026-01-01 00:00:00+00:00 (rates[1] and rates[2])"
        in str(e.value).splitlines()
    )


def test_every_cli_option_over_a_config_key_has_its_declared_bounds_and_default():
    """An option whose help names `[config section.key: default]` overrides that key: its range and the default it
    shows must be the declaration's (gpuledger.cli._config_option derives both), not a second copy."""
    import re

    import click

    from gpuledger.cli import main
    from gpuledger.config_keys import declared

    def options(cmd, path=()):
        for p in cmd.params:
            yield path, p
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from options(sub, (*path, name))

    seen = 0
    for path, p in options(main):
        m = re.search(r"\[config (\w+)\.(\w+): ([^\]]+)\]", getattr(p, "help", None) or "")
        if not m:
            continue
        section, name, shown = m.groups()
        values = getattr(config.defaults(), section)
        _, k, _ = next(d for d in declared(type(values)) if d[0].name == name)
        default = k.shown or getattr(values, name)
        assert shown == (", ".join(default) if isinstance(default, tuple) else str(default)), (path, p.name)
        if isinstance(p.type, click.types._NumberRangeBase):
            lo = k.ge if k.gt is None else k.gt
            hi = k.le if k.lt is None else k.lt
            assert (p.type.min, p.type.max) in ((lo, hi), (lo + 1 if k.gt is not None else lo, hi)), (path, p.name)
        seen += 1
    assert seen >= 8


def test_the_dashboard_password_comes_from_the_variable_the_config_names(tmp_path):
    f = tmp_path / "gl.toml"
    f.write_text('[dashboard]\nauth_user = "ops"\nauth_password_env = "GL_DASH_PW"\n')
    cfg = config.load(f, environ={"GL_DASH_PW": "s3cret"})
    assert config.dashboard_auth(cfg) == ("ops", "s3cret")
    assert "s3cret" not in repr(cfg)  # a logged config does not show it
    # Unset or empty: refused where the dashboards are served, naming the variable; loading still works, since the
    # collectors and the analytics read the same file without the dashboard's secret.
    for environ in ({}, {"GL_DASH_PW": ""}):
        cfg = config.load(f, environ=environ)
        with pytest.raises(ConfigError) as e:
            config.dashboard_auth(cfg)
        assert str(e.value).splitlines()[1] == (
            f"  {f} (environment): dashboard.auth_password_env: names 'GL_DASH_PW', which is not set in the environment"
        )
    assert config.dashboard_auth(config.load(None, environ={"GL_DASH_PW": "s3cret"})) is None


def test_classes_rules_in_file_order():
    cfg = config.parse(
        {
            "classes": [
                {"class": "inference", "namespaces": ["serving"]},
                {"class": "evaluation", "labels": {"gpuledger.io/team": "evals"}, "namespaces": ["research"]},
            ]
        },
        "x.toml",
    )
    assert cfg.classes == (
        config.ClassRule("inference", ("serving",)),
        config.ClassRule("evaluation", ("research",), {"gpuledger.io/team": "evals"}),
    )
    assert config.defaults().classes == ()


def test_class_policy_tables_set_only_the_keys_they_name():
    cfg = config.parse(
        {
            "class_policy": {
                "notebook": {"idle_after_h": 0.5, "priority_class": "interactive"},
                "inference": {"may_exceed_quota": True, "reclaim": True},
            }
        },
        "x.toml",
    )
    built_in = config.defaults().class_policy
    # The keys named change; the others keep that class's built-in values, not the dataclass defaults.
    assert cfg.class_policy["notebook"] == config.ClassPolicy(
        idle_below_pct=1.0, idle_after_h=0.5, reclaim=True, priority_class="interactive", may_exceed_quota=False
    )
    assert cfg.class_policy["inference"] == config.ClassPolicy(
        idle_below_pct=1.0, idle_after_h=2.0, reclaim=True, priority_class="", may_exceed_quota=True
    )
    assert cfg.class_policy["training"] == built_in["training"]
    # The built-in rules the issue names: a notebook after 1 h, training after 2 h, inference never reclaimed.
    assert (built_in["notebook"].idle_after_h, built_in["notebook"].reclaim) == (1.0, True)
    assert (built_in["training"].idle_after_h, built_in["training"].reclaim) == (2.0, True)
    assert built_in["inference"].reclaim is False and built_in["other"].reclaim is False
    assert set(built_in) == {"training", "inference", "notebook", "evaluation", "other"}


def test_class_policy_mistakes_are_named_together():
    with pytest.raises(ConfigError) as e:
        config.parse(
            {
                "class_policy": {
                    "notbook": {"idle_after_h": 1},
                    "training": {"idle_after_h": 0, "reclaim": "yes", "idle_below_pct": 101, "bogus": 1},
                    "inference": "never",
                }
            },
            "x.toml",
        )
    assert str(e.value).splitlines()[1:] == [
        "  x.toml: class_policy.notbook: unknown workload class 'notbook' (known: training, inference, notebook, "
        "evaluation, other)",
        "  x.toml: class_policy.training.bogus: unknown key (allowed: idle_after_h, idle_below_pct, may_exceed_quota, "
        "priority_class, reclaim)",
        "  x.toml: class_policy.training.idle_below_pct: must be in (0, 100], got 101",
        "  x.toml: class_policy.training.idle_after_h: must be > 0, got 0",
        "  x.toml: class_policy.training.reclaim: expected true or false, got str 'yes'",
        "  x.toml: class_policy.inference: expected a table, got str",
    ]
