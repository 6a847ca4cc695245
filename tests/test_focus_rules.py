"""The FOCUS 1.3 conformance checker (tests/focus_rules.py) against a small hand-built GPU chargeback dataset.

The dataset holds two origin charges (one hour of two GPUs), each replaced by its allocated charges: one per tenant
plus one unallocated (idle) portion, as FOCUS 1.3 split cost allocation requires.  It must pass every check; each
parametrised case then mutates it once and expects exactly the named violations.
"""

import datetime as dt
from decimal import Decimal

import focus_rules
import polars as pl
import pytest
from focus_rules import check_focus, check_split_allocation

UTC = dt.timezone.utc
MONEY = pl.Decimal(18, 6)
TS = pl.Datetime("us", "UTC")
KEY = ["ResourceId", "ChargePeriodStart", "ChargePeriodEnd"]
GPU_A = "GPU-3f1c2a9e-7b44-4e0e-9c1d-5a6b7c8d9e0a"
GPU_B = "GPU-8d2e4f61-0a13-4c2b-b7e5-1f2a3b4c5d6e"
HOUR = dt.datetime(2026, 11, 1, tzinfo=UTC)
ORG = "gpuledger lab"

# (GPU, node, tenant or None for the idle remainder, GPU-hours, GPU utilisation)
SPLITS = [
    (GPU_A, "gpu-node-01", "team-a", "0.5", 0.91),
    (GPU_A, "gpu-node-01", "team-b", "0.25", 0.64),
    (GPU_A, "gpu-node-01", None, "0.25", 0.0),
    (GPU_B, "gpu-node-02", "team-b", "0.75", 0.88),
    (GPU_B, "gpu-node-02", None, "0.25", 0.0),
]
LIST_PRICE, CONTRACTED_PRICE = Decimal("2.5"), Decimal("2.0")
DECIMAL_COLUMNS = [
    "BilledCost",
    "ConsumedQuantity",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "ListCost",
    "ListUnitPrice",
    "PricingQuantity",
]
DATETIME_COLUMNS = ["BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart"]


def _tags(node):
    return f'{{"cluster": "lab", "node": "{node}"}}'


def _method_details(ratio, quantity=None):
    element = f'"AllocatedRatio": {ratio}, "UsageUnit": "GPU-Hours", "UsageQuantity": {quantity or ratio}'
    return f'{{"Elements": [{{{element}}}]}}'


def gpu_dataset() -> pl.DataFrame:
    rows = []
    for gpu, node, tenant, hours, utilisation in SPLITS:
        quantity = Decimal(hours)
        rows.append(
            {
                "AllocatedMethodDetails": _method_details(hours),
                "AllocatedMethodId": "gpu-time-share-v1",
                "AllocatedResourceId": tenant,
                "AllocatedResourceName": tenant,
                "AllocatedTags": None if tenant is None else f'{{"k8s/namespace": "{tenant}"}}',
                "BilledCost": CONTRACTED_PRICE * quantity,
                "BillingAccountId": "cluster-lab",
                "BillingAccountName": "Lab GPU cluster",
                "BillingCurrency": "USD",
                "BillingPeriodEnd": dt.datetime(2026, 12, 1, tzinfo=UTC),
                "BillingPeriodStart": dt.datetime(2026, 11, 1, tzinfo=UTC),
                "ChargeCategory": "Usage",
                "ChargeClass": None,
                "ChargeDescription": f"H100 SXM GPU-hours on {node}",
                "ChargeFrequency": "Usage-Based",
                "ChargePeriodEnd": HOUR + dt.timedelta(hours=1),
                "ChargePeriodStart": HOUR,
                "ConsumedQuantity": quantity,
                "ConsumedUnit": "GPU-Hours",
                "ContractedCost": CONTRACTED_PRICE * quantity,
                "ContractedUnitPrice": CONTRACTED_PRICE,
                "EffectiveCost": CONTRACTED_PRICE * quantity,
                "HostProviderName": ORG,
                "InvoiceId": "lab/2026-11",
                "InvoiceIssuerName": ORG,
                "ListCost": LIST_PRICE * quantity,
                "ListUnitPrice": LIST_PRICE,
                "PricingCategory": "Standard",
                "PricingQuantity": quantity,
                "PricingUnit": "GPU-Hours",
                "ProviderName": ORG,
                "PublisherName": ORG,
                "RegionId": "onprem-1",
                "RegionName": "On-prem lab 1",
                "ResourceId": gpu,
                "ResourceName": f"{node}/gpu0",
                "ResourceType": "GPU",
                "ServiceCategory": "AI and Machine Learning",
                "ServiceName": "GPU Compute",
                "ServiceProviderName": ORG,
                "ServiceSubcategory": "Machine Learning",
                "SkuId": "H100-SXM-80GB",
                "SkuMeter": "GPU Hours",
                "SkuPriceDetails": '{"GpuCount": 1, "x_GpuModel": "H100 SXM 80GB"}',
                "SkuPriceId": "H100-SXM-80GB-standard",
                "SubAccountId": "cluster-lab/pool-a",
                "SubAccountName": "Pool A",
                "Tags": _tags(node),
                "x_GpuUtilization": utilisation,
                "x_IdleShare": 1.0 if tenant is None else 0.0,
            }
        )
    overrides = {c: MONEY for c in DECIMAL_COLUMNS} | {c: TS for c in DATETIME_COLUMNS} | {"ChargeClass": pl.String}
    return pl.DataFrame(rows, schema_overrides=overrides)


def gpu_origins() -> pl.DataFrame:
    """The two origin charges the allocated charges replaced: one GPU-hour each."""
    rows = []
    for gpu, node in ((GPU_A, "gpu-node-01"), (GPU_B, "gpu-node-02")):
        rows.append(
            {
                "ResourceId": gpu,
                "ChargePeriodStart": HOUR,
                "ChargePeriodEnd": HOUR + dt.timedelta(hours=1),
                "BilledCost": CONTRACTED_PRICE,
                "EffectiveCost": CONTRACTED_PRICE,
                "ListCost": LIST_PRICE,
                "ContractedCost": CONTRACTED_PRICE,
                "PricingQuantity": Decimal(1),
                "ConsumedQuantity": Decimal(1),
                "ListUnitPrice": LIST_PRICE,
                "ContractedUnitPrice": CONTRACTED_PRICE,
                "ChargeDescription": f"H100 SXM GPU-hours on {node}",
                "Tags": _tags(node),
            }
        )
    overrides = {c: MONEY for c in DECIMAL_COLUMNS} | {"ChargePeriodStart": TS, "ChargePeriodEnd": TS}
    return pl.DataFrame(rows, schema_overrides=overrides)


# -- Mutations --------------------------------------------------------------------------------------------------------


def set_cell(column, row, value):
    def mutate(df):
        dtype = df.schema[column]
        new = pl.lit(value, dtype=dtype) if value is not None else pl.lit(None, dtype=dtype)
        return df.with_columns(pl.when(pl.int_range(pl.len()) == row).then(new).otherwise(pl.col(column)).alias(column))

    return mutate


def set_column(column, expr):
    return lambda df: df.with_columns(expr.alias(column))


def drop(column):
    return lambda df: df.drop(column)


def insert_focus_column(column, value):
    """Add a FOCUS column before the custom x_ columns, so only the intended rule can fire."""

    def mutate(df):
        df = df.with_columns(pl.lit(value, dtype=pl.String).alias(column))
        focus = [c for c in df.columns if not c.startswith("x_")]
        return df.select(focus + [c for c in df.columns if c.startswith("x_")])

    return mutate


def chain(*mutations):
    def mutate(df):
        for m in mutations:
            df = m(df)
        return df

    return mutate


def strings_for(column):
    return set_column(column, pl.col(column).dt.strftime("%Y-%m-%dT%H:%M:%SZ"))


def head(message):
    """'<Column>: [<rule>]', the part of a violation line the tests pin down."""
    return message.split("]", 1)[0] + "]"


# -- The dataset passes ---------------------------------------------------------------------------------------------


def test_column_table_is_the_focus_1_3_cost_and_usage_set():
    assert len(focus_rules.COLUMNS) == 65
    mandatory = {c for c, spec in focus_rules.COLUMNS.items() if spec["level"] == "Mandatory"}
    assert {
        "ServiceProviderName",
        "HostProviderName",
        "InvoiceIssuerName",
        "ProviderName",
        "PublisherName",
    } <= mandatory
    assert "CommitmentProgramEligibilityDetails" not in focus_rules.COLUMNS  # a 1.4 column
    assert focus_rules.SERVICE_SUBCATEGORY_PARENT["Other (Compute)"] == "Compute"


def test_conformant_gpu_dataset_passes_both_checks():
    df = gpu_dataset()
    assert check_focus(df) == []
    assert check_split_allocation(df, KEY) == []
    assert check_split_allocation(df, KEY, gpu_origins()) == []


def test_string_datetimes_in_the_focus_format_pass():
    df = chain(*(strings_for(c) for c in DATETIME_COLUMNS))(gpu_dataset())
    assert df.schema["ChargePeriodStart"] == pl.String
    assert check_focus(df) == []
    assert check_split_allocation(df, KEY, gpu_origins()) == []


def test_float_metrics_pass_within_tolerance():
    def to_float(df):
        return df.with_columns(pl.col(c).cast(pl.Float64) for c in DECIMAL_COLUMNS if c in df.columns)

    df = to_float(gpu_dataset())
    # 0.1 + 0.2 style rounding noise is tolerated for floats ...
    df = df.with_columns(pl.col("ListCost") + 1e-13)
    assert check_focus(df) == []
    assert check_split_allocation(df, KEY, to_float(gpu_origins())) == []
    # ... but a real difference is not.
    off = set_cell("ListCost", 0, 1.26)(df)
    assert [head(m) for m in check_focus(off)] == ["ListCost: [unit-price-product]"]


def test_decimal_products_are_exact():
    df = set_cell("ListCost", 0, Decimal("1.250001"))(gpu_dataset())
    assert [head(m) for m in check_focus(df)] == ["ListCost: [unit-price-product]"]


def test_a_correction_outside_its_billing_period_is_exempt():
    previous = dt.datetime(2026, 10, 31, 23, tzinfo=UTC)
    df = chain(
        set_cell("ChargeClass", 0, "Correction"),
        set_cell("ChargePeriodStart", 0, previous),
        set_cell("ChargePeriodEnd", 0, previous + dt.timedelta(hours=1)),
    )(gpu_dataset())
    assert check_focus(df) == []


# -- One mutation, one rule: check_focus ----------------------------------------------------------------------------

NEXT_MONTH = dt.datetime(2026, 12, 1, tzinfo=UTC)

FOCUS_CASES = [
    # presence, names, order
    (
        "mandatory ProviderName (deprecated, still required)",
        drop("ProviderName"),
        ["ProviderName: [missing-mandatory]"],
    ),
    ("mandatory ServiceProviderName", drop("ServiceProviderName"), ["ServiceProviderName: [missing-mandatory]"]),
    ("mandatory HostProviderName", drop("HostProviderName"), ["HostProviderName: [missing-mandatory]"]),
    ("mandatory InvoiceIssuerName", drop("InvoiceIssuerName"), ["InvoiceIssuerName: [missing-mandatory]"]),
    ("unknown column", set_column("GpuUtilization", pl.lit(0.5)), ["GpuUtilization: [unknown-column]"]),
    (
        "custom column before FOCUS columns",
        lambda df: df.select(["x_IdleShare"] + [c for c in df.columns if c != "x_IdleShare"]),
        ["x_IdleShare: [custom-column-order]"],
    ),
    # types and formats
    ("Decimal column as text", set_column("BilledCost", pl.col("BilledCost").cast(pl.String)), ["BilledCost: [type]"]),
    (
        "naive timestamp",
        set_column("BillingPeriodStart", pl.col("BillingPeriodStart").dt.replace_time_zone(None)),
        ["BillingPeriodStart: [type]"],
    ),
    (
        "date/time string not in the FOCUS format",
        chain(strings_for("ChargePeriodEnd"), set_cell("ChargePeriodEnd", 1, "2026-11-01 01:00:00")),
        ["ChargePeriodEnd: [datetime-format]"],
    ),
    ("Tags not JSON", set_cell("Tags", 2, "cluster=lab"), ["Tags: [json-object]"]),
    (
        "Tags with a duplicate key",
        set_cell("Tags", 0, '{"cluster": "lab", "cluster": "lab2", "node": "gpu-node-01"}'),
        ["Tags: [json-object]"],
    ),
    (
        "Tags value is an object",
        set_cell("Tags", 0, '{"cluster": {"name": "lab"}, "node": "gpu-node-01"}'),
        ["Tags: [key-value]"],
    ),
    (
        "AllocatedMethodDetails not an object",
        set_cell("AllocatedMethodDetails", 0, "[1, 2]"),
        ["AllocatedMethodDetails: [json-object]"],
    ),
    (
        "AllocatedMethodDetails without Elements",
        set_cell("AllocatedMethodDetails", 0, '{"AllocatedRatio": 0.5}'),
        ["AllocatedMethodDetails: [object-schema]"],
    ),
    (
        "SkuPriceDetails key not FOCUS nor x_",
        set_column("SkuPriceDetails", pl.lit('{"Gpus": 1}')),
        ["SkuPriceDetails: [property-key]"],
    ),
    # presence a dataset can show, and associations across rows
    (
        "no SkuPriceDetails beside list prices",
        drop("SkuPriceDetails"),
        ["SkuPriceDetails: [missing-conditional]"],
    ),
    (
        "two SkuPriceDetails for one SkuPriceId",
        set_cell("SkuPriceDetails", 0, '{"GpuCount": 2, "x_GpuModel": "H100 SXM 80GB"}'),
        ["SkuPriceDetails: [one-per-sku-price]"],
    ),
    (
        "one InvoiceId for two billing accounts",
        set_cell("BillingAccountId", 0, "cluster-other"),
        ["InvoiceId: [one-billing-account]"],
    ),
    (
        "AllocatedTags repeats a tag of Tags",
        set_cell("AllocatedTags", 0, '{"cluster": "lab", "k8s/namespace": "team-a"}'),
        ["AllocatedTags: [duplicates-tags]"],
    ),
    (
        "BillingCurrency not ISO 4217",
        set_column("BillingCurrency", pl.lit("usd")),
        ["BillingCurrency: [currency-code]"],
    ),
    ("empty string instead of null", set_cell("ResourceName", 0, ""), ["ResourceName: [null-handling]"]),
    (
        "placeholder instead of null",
        set_cell("HostProviderName", 3, "Not Applicable"),
        ["HostProviderName: [null-handling]"],
    ),
    (
        "NaN cost",
        chain(set_column("BilledCost", pl.col("BilledCost").cast(pl.Float64)), set_cell("BilledCost", 0, float("nan"))),
        ["BilledCost: [valid-decimal]"],
    ),
    (
        "negative unit price",
        chain(set_cell("ListUnitPrice", 0, Decimal("-2.5")), set_cell("ListCost", 0, Decimal("-1.25"))),
        ["ListUnitPrice: [non-negative]"],
    ),
    # unconditional nulls
    ("BillingAccountId null", set_cell("BillingAccountId", 3, None), ["BillingAccountId: [not-null]"]),
    ("ServiceProviderName null", set_cell("ServiceProviderName", 0, None), ["ServiceProviderName: [not-null]"]),
    ("InvoiceIssuerName null", set_cell("InvoiceIssuerName", 0, None), ["InvoiceIssuerName: [not-null]"]),
    ("PublisherName null", set_cell("PublisherName", 0, None), ["PublisherName: [not-null]"]),
    # allowed values
    ("ChargeCategory", set_cell("ChargeCategory", 1, "Use"), ["ChargeCategory: [allowed-value]"]),
    ("ChargeClass", set_cell("ChargeClass", 0, "Refund"), ["ChargeClass: [allowed-value]"]),
    ("ChargeFrequency", set_cell("ChargeFrequency", 0, "Hourly"), ["ChargeFrequency: [allowed-value]"]),
    ("PricingCategory", set_cell("PricingCategory", 0, "OnDemand"), ["PricingCategory: [allowed-value]"]),
    ("ServiceCategory", set_column("ServiceCategory", pl.lit("AI/ML")), ["ServiceCategory: [allowed-value]"]),
    ("ServiceSubcategory", set_column("ServiceSubcategory", pl.lit("GPU")), ["ServiceSubcategory: [allowed-value]"]),
    (
        "CommitmentDiscountStatus",
        insert_focus_column("CommitmentDiscountStatus", "Partial"),
        ["CommitmentDiscountStatus: [allowed-value]"],
    ),
    (
        "ServiceSubcategory under another category",
        set_column("ServiceSubcategory", pl.lit("Containers")),
        ["ServiceSubcategory: [parent-category]"],
    ),
    # conditional nulls and cross-column rules
    (
        "Usage-Based purchase",
        chain(
            set_cell("ChargeCategory", 0, "Purchase"),
            set_cell("ConsumedQuantity", 0, None),
            set_cell("ConsumedUnit", 0, None),
        ),
        ["ChargeFrequency: [purchase-frequency]"],
    ),
    ("PricingUnit without quantity", set_cell("PricingUnit", 0, None), ["PricingUnit: [null-iff]"]),
    (
        "PricingQuantity missing on usage",
        chain(set_cell("PricingQuantity", 0, None), set_cell("PricingUnit", 0, None)),
        ["PricingQuantity: [not-null-when]"],
    ),
    (
        "ListUnitPrice missing on usage with a SKU price",
        set_cell("ListUnitPrice", 0, None),
        ["ListUnitPrice: [not-null-when]", "ListUnitPrice: [not-null-when]"],
    ),
    ("PricingCategory missing on usage", set_cell("PricingCategory", 0, None), ["PricingCategory: [not-null-when]"]),
    ("ResourceType without ResourceId rule", set_cell("ResourceType", 0, None), ["ResourceType: [null-iff]"]),
    (
        "SkuId missing on usage",
        chain(set_cell("SkuId", 0, None), set_cell("SkuMeter", 0, None)),
        ["SkuId: [not-null-when]"],
    ),
    (
        "ConsumedQuantity missing on usage",
        chain(set_cell("ConsumedQuantity", 0, None), set_cell("ConsumedUnit", 0, None)),
        ["ConsumedQuantity: [not-null-when]"],
    ),
    (
        "ConsumedQuantity on a non-usage charge",
        set_cell("ChargeCategory", 0, "Adjustment"),
        ["ConsumedQuantity: [null-when]"],
    ),
    ("ConsumedUnit without quantity rule", set_cell("ConsumedUnit", 0, None), ["ConsumedUnit: [null-iff]"]),
    ("RegionName without RegionId rule", set_cell("RegionName", 0, None), ["RegionName: [null-iff]"]),
    ("HostProviderName null for a GPU", set_cell("HostProviderName", 0, None), ["HostProviderName: [not-null-when]"]),
    ("AllocatedResourceName null", set_cell("AllocatedResourceName", 0, None), ["AllocatedResourceName: [null-iff]"]),
    (
        "AllocatedResourceId on an unsplit charge",
        chain(
            set_cell("AllocatedMethodId", 0, None),
            set_cell("AllocatedMethodDetails", 0, None),
            set_cell("AllocatedTags", 0, None),
        ),
        ["AllocatedResourceId: [null-when]"],
    ),
    ("ListCost is not price x quantity", set_cell("ListCost", 1, Decimal("0.635")), ["ListCost: [unit-price-product]"]),
    (
        "ContractedCost is not price x quantity",
        set_cell("ContractedCost", 1, Decimal("0.51")),
        ["ContractedCost: [unit-price-product]"],
    ),
    # charge periods
    ("empty charge period", set_cell("ChargePeriodEnd", 0, HOUR), ["ChargePeriodStart: [period-order]"]),
    (
        "charge outside its billing period",
        chain(
            set_cell("ChargePeriodStart", 0, NEXT_MONTH),
            set_cell("ChargePeriodEnd", 0, NEXT_MONTH + dt.timedelta(hours=1)),
        ),
        ["ChargePeriodStart: [within-billing-period]"],
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in FOCUS_CASES], ids=[c[0] for c in FOCUS_CASES])
def test_one_mutation_gives_exactly_its_violation(mutate, expected):
    violations = check_focus(mutate(gpu_dataset()))
    assert [head(v) for v in violations] == expected, violations


def test_supported_columns_must_be_present():
    # InvoiceId is Recommended: its absence is reported only when the data generator says it supports invoices.
    df = drop("InvoiceId")(gpu_dataset())
    assert check_focus(df) == []
    assert [head(v) for v in check_focus(df, supported=("InvoiceId", "SkuPriceDetails"))] == [
        "InvoiceId: [missing-supported]"
    ]
    # Without list prices, nothing shows a price list: SkuPriceDetails may be absent unless said supported.
    no_list = drop("SkuPriceDetails")(gpu_dataset()).with_columns(pl.lit(None, dtype=MONEY).alias("ListUnitPrice"))
    assert "SkuPriceDetails: [missing-conditional]" not in [head(v) for v in check_focus(no_list)]


def test_row_level_messages_name_the_first_offending_row_and_value():
    (message,) = check_focus(set_cell("BillingAccountId", 3, None)(gpu_dataset()))
    assert message.startswith("BillingAccountId: [not-null] MUST NOT be null")
    assert "1 row(s), first row 3: BillingAccountId=None" in message
    (message,) = check_focus(set_cell("ChargeCategory", 1, "Use")(gpu_dataset()))
    assert "first row 1: ChargeCategory='Use'" in message


# -- One mutation, one rule: check_split_allocation -----------------------------------------------------------------


def keep_origin_row(df):
    """The mistake of keeping the origin charge beside its allocated charges."""
    origin = df.head(1).with_columns(
        pl.lit(None, dtype=pl.String).alias(c)
        for c in ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName")
    )
    origin = origin.with_columns(pl.lit(None, dtype=pl.String).alias("AllocatedTags"))
    return pl.concat([df, origin])


def drop_origin(gpu):
    return lambda origins: origins.filter(pl.col("ResourceId") != gpu)


def extra_origin(origins):
    return pl.concat([origins, origins.head(1).with_columns(pl.lit("GPU-unsplit").alias("ResourceId"))])


SPLIT_CASES = [
    # (id, mutate dataset, mutate origins or None to check without origins, expected)
    (
        "missing AllocatedResourceName",
        drop("AllocatedResourceName"),
        None,
        ["AllocatedResourceName: [missing-conditional]"],
    ),
    (
        "dimension differs within an origin",
        set_cell("ChargeDescription", 1, "something else"),
        None,
        ["ChargeDescription: [split-dimension]"],
    ),
    (
        "dimension differs from the origin",
        set_cell("ChargeDescription", 1, "something else"),
        lambda o: o,
        ["ChargeDescription: [split-dimension]"],
    ),
    (
        "tenant put in SubAccountId",
        set_cell("SubAccountId", 0, "team-a"),
        None,
        ["SubAccountId: [split-dimension]"],
    ),
    (
        "unit price differs within an origin",
        set_cell("ListUnitPrice", 1, Decimal("2.4")),
        None,
        ["ListUnitPrice: [split-non-summable]"],
    ),
    (
        "unit price differs from the origin",
        set_cell("ListUnitPrice", 1, Decimal("2.4")),
        lambda o: o,
        ["ListUnitPrice: [split-non-summable]"],
    ),
    ("Tags differ within an origin", set_cell("Tags", 1, '{"cluster": "lab"}'), None, ["Tags: [split-tags]"]),
    (
        "origin Tags not carried",
        lambda df: df,
        lambda o: o.with_columns(pl.col("Tags").str.replace("}", ', "rack": "r1"}')),
        ["Tags: [split-tags]"],
    ),
    ("BilledCost does not sum", set_cell("BilledCost", 0, Decimal("1.01")), lambda o: o, ["BilledCost: [split-sum]"]),
    (
        "EffectiveCost does not sum",
        set_cell("EffectiveCost", 3, Decimal("1.4")),
        lambda o: o,
        ["EffectiveCost: [split-sum]"],
    ),
    ("ListCost does not sum", set_cell("ListCost", 2, Decimal("0.6")), lambda o: o, ["ListCost: [split-sum]"]),
    (
        "ContractedCost does not sum",
        set_cell("ContractedCost", 4, Decimal("0.4")),
        lambda o: o,
        ["ContractedCost: [split-sum]"],
    ),
    (
        "PricingQuantity does not sum",
        set_cell("PricingQuantity", 0, Decimal("0.6")),
        lambda o: o,
        ["PricingQuantity: [split-sum]"],
    ),
    (
        "ConsumedQuantity does not sum",
        set_cell("ConsumedQuantity", 0, Decimal("0.6")),
        lambda o: o,
        ["ConsumedQuantity: [split-sum]"],
    ),
    (
        "two unallocated portions",
        chain(set_cell("AllocatedResourceId", 1, None), set_cell("AllocatedResourceName", 1, None)),
        None,
        ["AllocatedResourceId: [unallocated-portion]"],
    ),
    (
        "AllocatedRatio does not sum to 1",
        set_cell("AllocatedMethodDetails", 0, _method_details("0.6", "0.5")),
        None,
        ["AllocatedMethodDetails: [ratio-sum]"],
    ),
    ("origin kept beside its split", keep_origin_row, None, ["AllocatedMethodId: [origin-not-replaced]"]),
    ("origin missing from origins", lambda df: df, drop_origin(GPU_B), ["AllocatedMethodId: [origin-missing]"]),
    ("origin without allocated charges", lambda df: df, extra_origin, ["AllocatedMethodId: [no-allocated-charges]"]),
]


@pytest.mark.parametrize(
    ("mutate", "mutate_origins", "expected"), [c[1:] for c in SPLIT_CASES], ids=[c[0] for c in SPLIT_CASES]
)
def test_one_split_mutation_gives_exactly_its_violation(mutate, mutate_origins, expected):
    origins = None if mutate_origins is None else mutate_origins(gpu_origins())
    violations = check_split_allocation(mutate(gpu_dataset()), KEY, origins)
    assert [head(v) for v in violations] == expected, violations


def test_split_sum_message_names_the_origin_and_both_values():
    df = set_cell("BilledCost", 0, Decimal("1.01"))(gpu_dataset())
    (message,) = check_split_allocation(df, KEY, gpu_origins())
    assert f"ResourceId='{GPU_A}', ChargePeriodStart=2026-11-01T00:00:00Z" in message
    assert "allocated sum Decimal('2.010000') != origin Decimal('2.000000')" in message


def test_origin_key_must_exist():
    with pytest.raises(ValueError, match="SkuPriceIdentifier"):
        check_split_allocation(gpu_dataset(), [*KEY, "SkuPriceIdentifier"])
