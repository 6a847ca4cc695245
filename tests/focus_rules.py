"""FOCUS 1.3 Cost and Usage conformance checks, written from the specification text alone.

Source: repository FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, FOCUS 1.3 (Cost and Usage + Contract Commitment
datasets; ProviderName/PublisherName deprecated but still present).  The column list is the 65 files included by
specification/datasets/cost_and_usage/columns/columns.mdpp at commit d62b68b; each COLUMNS entry names its column file
and the commit read (short hash).  Entries marked "(1.3 set)" were read in a vendored concatenation of all 65 FOCUS 1.3
Cost and Usage column files (its header names FOCUS_Spec as the source; its wording matched every file also read
directly), because not every per-file version available to read was the 1.3 one.

What the module checks and what it leaves out:

* Presence: every Mandatory column (including the deprecated ProviderName and PublisherName, which 1.3 still says
  "MUST be present in a Cost and Usage FOCUS dataset").  Conditional and Recommended columns depend on what the data
  generator supports, which a dataset mostly cannot tell: their absence is reported only where the data shows the
  condition (SkuPriceDetails when ListUnitPrice holds a published list price), or when the caller names them as
  supported (``check_focus(df, supported=(...))``).
* Associations across rows: an InvoiceId belongs to one BillingAccountId (invoiceid.md), and a SkuPriceId has one
  SkuPriceDetails (skupricedetails.md: "associated with a given SkuPriceId", shared by all its charges).
* Names and order (attributes/column_handling.md): a column that is not FOCUS must start with ``x_``; custom columns
  SHOULD come after all FOCUS columns (a SHOULD in the spec, checked because gpuledger promises it).
* Types, nulls, allowed values and the conditional nullability written in each column's Requirements section.
* Value formats: Date/Time (attributes/datetime_format.md), JSON objects and key-value objects
  (attributes/json_object_format.md, attributes/key_value_format.md), ISO 4217 billing currency
  (attributes/currency_format.md), no empty strings or placeholders (attributes/null_handling.md).
* Charge periods: start before end, and (gpuledger policy, not a FOCUS MUST: the spec states no such requirement)
  non-correction charges lie inside their billing period.  BillingPeriodStart/End are not required to be month
  boundaries.

Split cost allocation representation (attributes/data_generator_calculated_split_cost_allocation_handling.md at
0942b25, with glossary.md "Origin Charge"/"Allocated Charge"): the data generator "takes a charge record present in a
FOCUS dataset (origin charge) and splits it into multiple charge records (allocated charges) ... while ensuring the
origin charge can be derived from the combination of allocated charges".  The origin charge is the charge "that
existed prior to" the split: once split it is REPLACED by its allocated charges, not kept beside them (keeping it
would count its cost twice, and the sums of BilledCost per InvoiceId must match the invoice, billedcost.md).  The
unallocated remainder (idle GPU time) is one more allocated charge with AllocatedResourceId null
(allocatedresourceid.md).  So ``check_split_allocation`` reads the allocated charges (AllocatedMethodId not null) from
the dataset and, because the origin rows are no longer in it, takes the origin charges as an optional separate frame.

Only polars, json, re, datetime and decimal are imported, so the module can be read next to the spec.
"""

import datetime as dt
import json
import re
from decimal import Decimal

import polars as pl

MANDATORY, CONDITIONAL, RECOMMENDED = "Mandatory", "Conditional", "Recommended"
DECIMAL, STRING, DATETIME, JSON = "Decimal", "String", "DateTime", "JSON"
# Column type from each file's Content Constraints table; metrics split into summable ones (costs, quantities) and
# non-summable ones (unit prices), the distinction the split cost allocation attribute makes.
DIMENSION, METRIC, UNIT_PRICE, MIXED = "Dimension", "Metric", "UnitPrice", "Dimension and Metric"

# -- Allowed values -------------------------------------------------------------------------------------------------

CHARGE_CATEGORY = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")  # chargecategory.md@4a76f48
CHARGE_CLASS = ("Correction",)  # chargeclass.md@4a2e4e6
CHARGE_FREQUENCY = ("One-Time", "Recurring", "Usage-Based")  # chargefrequency.md@1069b3c
PRICING_CATEGORY = ("Standard", "Dynamic", "Committed", "Other")  # pricingcategory.md@217567a and (1.3 set)
COMMITMENT_DISCOUNT_STATUS = ("Used", "Unused")  # commitmentdiscountstatus.md (1.3 set)
COMMITMENT_DISCOUNT_CATEGORY = ("Spend", "Usage")  # commitmentdiscountcategory.md (1.3 set)
CAPACITY_RESERVATION_STATUS = ("Used", "Unused")  # capacityreservationstatus.md (1.3 set)

# servicecategory.md@d54c158
SERVICE_CATEGORY = (
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
)

# servicesubcategory.md@c67b95b: every subcategory has exactly one parent category.
_SUBCATEGORIES = {
    "AI and Machine Learning": (
        "AI Platforms",
        "Bots",
        "Generative AI",
        "Machine Learning",
        "Natural Language Processing",
        "Other (AI and Machine Learning)",
    ),
    "Analytics": (
        "Analytics Platforms",
        "Business Intelligence",
        "Data Processing",
        "Search",
        "Streaming Analytics",
        "Other (Analytics)",
    ),
    "Business Applications": ("Productivity and Collaboration", "Other (Business Applications)"),
    "Compute": (
        "Containers",
        "End User Computing",
        "Quantum Compute",
        "Serverless Compute",
        "Virtual Machines",
        "Other (Compute)",
    ),
    "Databases": (
        "Caching",
        "Data Warehouses",
        "Ledger Databases",
        "NoSQL Databases",
        "Relational Databases",
        "Time Series Databases",
        "Other (Databases)",
    ),
    "Developer Tools": (
        "Developer Platforms",
        "Continuous Integration and Deployment",
        "Development Environments",
        "Source Code Management",
        "Quality Assurance",
        "Other (Developer Tools)",
    ),
    "Identity": ("Identity and Access Management", "Other (Identity)"),
    "Integration": ("API Management", "Messaging", "Workflow Orchestration", "Other (Integration)"),
    "Internet of Things": ("IoT Analytics", "IoT Platforms", "Other (Internet of Things)"),
    "Management and Governance": (
        "Architecture",
        "Compliance",
        "Cost Management",
        "Data Governance",
        "Disaster Recovery",
        "Endpoint Management",
        "Observability",
        "Support",
        "Other (Management and Governance)",
    ),
    "Media": ("Content Creation", "Gaming", "Media Streaming", "Mixed Reality", "Other (Media)"),
    "Migration": ("Data Migration", "Resource Migration", "Other (Migration)"),
    "Mobile": ("Other (Mobile)",),
    "Multicloud": ("Multicloud Integration", "Other (Multicloud)"),
    "Networking": (
        "Application Networking",
        "Content Delivery",
        "Network Connectivity",
        "Network Infrastructure",
        "Network Routing",
        "Network Security",
        "Other (Networking)",
    ),
    "Security": (
        "Secret Management",
        "Security Posture Management",
        "Threat Detection and Response",
        "Other (Security)",
    ),
    "Storage": (
        "Backup Storage",
        "Block Storage",
        "File Storage",
        "Object Storage",
        "Storage Platforms",
        "Other (Storage)",
    ),
    "Web": ("Application Platforms", "Other (Web)"),
    "Other": ("Other (Other)",),
}
SERVICE_SUBCATEGORY_PARENT = {sub: parent for parent, subs in _SUBCATEGORIES.items() for sub in subs}

# skupricedetails.md (1.3 set): FOCUS-defined property keys; any other key must start with "x_".
SKU_PRICE_PROPERTIES = frozenset(
    (
        "CoreCount",
        "DiskMaxIops",
        "DiskSpace",
        "DiskType",
        "GpuCount",
        "InstanceType",
        "InstanceSeries",
        "MemorySize",
        "NetworkMaxIops",
        "NetworkMaxThroughput",
        "OperatingSystem",
        "Redundancy",
        "StorageClass",
    )
)
# allocatedmethoddetails.md@890970f: FOCUS-defined keys of an "Elements" entry.
ALLOCATION_PROPERTIES = frozenset(("AllocatedRatio", "UsageUnit", "UsageQuantity"))


# -- Column table ---------------------------------------------------------------------------------------------------


def _col(level, dtype, nullable, kind, source, allowed=None):
    return {"level": level, "type": dtype, "nullable": nullable, "kind": kind, "source": source, "allowed": allowed}


# Column ID: feature level, data type, "Allows nulls", column type, spec file under
# specification/datasets/cost_and_usage/columns/ @ commit read, allowed values.
COLUMNS = {
    "AllocatedMethodDetails": _col(RECOMMENDED, JSON, True, MIXED, "allocatedmethoddetails.md@890970f"),
    "AllocatedMethodId": _col(CONDITIONAL, STRING, True, DIMENSION, "allocatedmethodid.md@d54c158"),
    "AllocatedResourceId": _col(CONDITIONAL, STRING, True, DIMENSION, "allocatedresourceid.md@4a76f48"),
    "AllocatedResourceName": _col(CONDITIONAL, STRING, True, DIMENSION, "allocatedresourcename.md@4a76f48"),
    "AllocatedTags": _col(CONDITIONAL, JSON, True, DIMENSION, "allocatedtags.md@4a76f48"),
    "AvailabilityZone": _col(RECOMMENDED, STRING, True, DIMENSION, "availabilityzone.md (1.3 set)"),
    "BilledCost": _col(MANDATORY, DECIMAL, False, METRIC, "billedcost.md (1.3 set)"),
    "BillingAccountId": _col(MANDATORY, STRING, False, DIMENSION, "billingaccountid.md (1.3 set)"),
    "BillingAccountName": _col(MANDATORY, STRING, True, DIMENSION, "billingaccountname.md (1.3 set)"),
    "BillingAccountType": _col(CONDITIONAL, STRING, False, DIMENSION, "billingaccounttype.md (1.3 set)"),
    "BillingCurrency": _col(MANDATORY, STRING, False, DIMENSION, "billingcurrency.md (1.3 set)"),
    "BillingPeriodEnd": _col(MANDATORY, DATETIME, False, DIMENSION, "billingperiodend.md (1.3 set)"),
    "BillingPeriodStart": _col(MANDATORY, DATETIME, False, DIMENSION, "billingperiodstart.md (1.3 set)"),
    "CapacityReservationId": _col(CONDITIONAL, STRING, True, DIMENSION, "capacityreservationid.md (1.3 set)"),
    "CapacityReservationStatus": _col(
        CONDITIONAL, STRING, True, DIMENSION, "capacityreservationstatus.md (1.3 set)", CAPACITY_RESERVATION_STATUS
    ),
    "ChargeCategory": _col(MANDATORY, STRING, False, DIMENSION, "chargecategory.md@4a76f48", CHARGE_CATEGORY),
    "ChargeClass": _col(MANDATORY, STRING, True, DIMENSION, "chargeclass.md@4a2e4e6", CHARGE_CLASS),
    "ChargeDescription": _col(MANDATORY, STRING, True, DIMENSION, "chargedescription.md (1.3 set)"),
    "ChargeFrequency": _col(RECOMMENDED, STRING, False, DIMENSION, "chargefrequency.md@1069b3c", CHARGE_FREQUENCY),
    "ChargePeriodEnd": _col(MANDATORY, DATETIME, False, DIMENSION, "chargeperiodend.md (1.3 set)"),
    "ChargePeriodStart": _col(MANDATORY, DATETIME, False, DIMENSION, "chargeperiodstart.md (1.3 set)"),
    "CommitmentDiscountCategory": _col(
        CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscountcategory.md (1.3 set)", COMMITMENT_DISCOUNT_CATEGORY
    ),
    "CommitmentDiscountId": _col(CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscountid.md (1.3 set)"),
    "CommitmentDiscountName": _col(CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscountname.md (1.3 set)"),
    "CommitmentDiscountQuantity": _col(CONDITIONAL, DECIMAL, True, METRIC, "commitmentdiscountquantity.md (1.3 set)"),
    "CommitmentDiscountStatus": _col(
        CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscountstatus.md (1.3 set)", COMMITMENT_DISCOUNT_STATUS
    ),
    "CommitmentDiscountType": _col(CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscounttype.md (1.3 set)"),
    "CommitmentDiscountUnit": _col(CONDITIONAL, STRING, True, DIMENSION, "commitmentdiscountunit.md (1.3 set)"),
    "ConsumedQuantity": _col(CONDITIONAL, DECIMAL, True, METRIC, "consumedquantity.md@890970f"),
    "ConsumedUnit": _col(CONDITIONAL, STRING, True, DIMENSION, "consumedunit.md (1.3 set)"),
    "ContractApplied": _col(CONDITIONAL, JSON, True, MIXED, "contractapplied.md (1.3 set)"),
    "ContractedCost": _col(MANDATORY, DECIMAL, False, METRIC, "contractedcost.md (1.3 set)"),
    "ContractedUnitPrice": _col(CONDITIONAL, DECIMAL, True, UNIT_PRICE, "contractedunitprice.md (1.3 set)"),
    "EffectiveCost": _col(MANDATORY, DECIMAL, False, METRIC, "effectivecost.md (1.3 set)"),
    # Mandatory but nullable in 1.3: "MAY be NULL" for services with no underlying infrastructure and for charges
    # whose host cannot be determined (e.g. Tax, Adjustment); see _conditional_rules.  (A draft at 03c652c used the
    # placeholder "Not Applicable" instead, which null_handling.md forbids; the 1.3 set has the NULL wording.)
    "HostProviderName": _col(MANDATORY, STRING, True, DIMENSION, "hostprovidername.md@c67b95b"),
    "InvoiceId": _col(RECOMMENDED, STRING, True, DIMENSION, "invoiceid.md (1.3 set)"),
    "InvoiceIssuerName": _col(MANDATORY, STRING, False, DIMENSION, "invoiceissuername.md (1.3 set)"),
    "ListCost": _col(MANDATORY, DECIMAL, False, METRIC, "listcost.md@4a2e4e6"),
    "ListUnitPrice": _col(CONDITIONAL, DECIMAL, True, UNIT_PRICE, "listunitprice.md (1.3 set)"),
    # The version at 217567a predates 1.3's "MUST be null when SkuPriceId is null", which the 1.3 set has.
    "PricingCategory": _col(CONDITIONAL, STRING, True, DIMENSION, "pricingcategory.md (1.3 set)", PRICING_CATEGORY),
    # The table says "Allows nulls: True" but the requirement text says "PricingCurrency MUST NOT be null"; the
    # normative bullet wins.
    "PricingCurrency": _col(CONDITIONAL, STRING, False, DIMENSION, "pricingcurrency.md (1.3 set)"),
    "PricingCurrencyContractedUnitPrice": _col(
        CONDITIONAL, DECIMAL, True, UNIT_PRICE, "pricingcurrencycontractedunitprice.md (1.3 set)"
    ),
    # Same table/text disagreement as PricingCurrency: "PricingCurrencyEffectiveCost MUST NOT be null".
    "PricingCurrencyEffectiveCost": _col(
        CONDITIONAL, DECIMAL, False, METRIC, "pricingcurrencyeffectivecost.md (1.3 set)"
    ),
    "PricingCurrencyListUnitPrice": _col(
        CONDITIONAL, DECIMAL, True, UNIT_PRICE, "pricingcurrencylistunitprice.md (1.3 set)"
    ),
    "PricingQuantity": _col(MANDATORY, DECIMAL, True, METRIC, "pricingquantity.md@c614c4c"),
    "PricingUnit": _col(MANDATORY, STRING, True, DIMENSION, "pricingunit.md (1.3 set)"),
    # Deprecated in 1.3 (replaced by ServiceProviderName) yet still Mandatory and not null in 1.3; removed in 1.4.
    "ProviderName": _col(MANDATORY, STRING, False, DIMENSION, "providername.md@1069b3c"),
    "PublisherName": _col(MANDATORY, STRING, False, DIMENSION, "publishername.md@0f82f3a"),
    "RegionId": _col(CONDITIONAL, STRING, True, DIMENSION, "regionid.md (1.3 set)"),
    "RegionName": _col(CONDITIONAL, STRING, True, DIMENSION, "regionname.md (1.3 set)"),
    "ResourceId": _col(CONDITIONAL, STRING, True, DIMENSION, "resourceid.md (1.3 set)"),
    "ResourceName": _col(CONDITIONAL, STRING, True, DIMENSION, "resourcename.md (1.3 set)"),
    "ResourceType": _col(CONDITIONAL, STRING, True, DIMENSION, "resourcetype.md@d54c158"),
    "ServiceCategory": _col(MANDATORY, STRING, False, DIMENSION, "servicecategory.md@d54c158", SERVICE_CATEGORY),
    "ServiceName": _col(MANDATORY, STRING, False, DIMENSION, "servicename.md (1.3 set)"),
    "ServiceProviderName": _col(MANDATORY, STRING, False, DIMENSION, "serviceprovidername.md@d54c158"),
    "ServiceSubcategory": _col(
        RECOMMENDED, STRING, False, DIMENSION, "servicesubcategory.md@c67b95b", tuple(SERVICE_SUBCATEGORY_PARENT)
    ),
    "SkuId": _col(CONDITIONAL, STRING, True, DIMENSION, "skuid.md@0c9433b"),
    "SkuMeter": _col(CONDITIONAL, STRING, True, DIMENSION, "skumeter.md (1.3 set)"),
    "SkuPriceDetails": _col(CONDITIONAL, JSON, True, DIMENSION, "skupricedetails.md (1.3 set)"),
    "SkuPriceId": _col(CONDITIONAL, STRING, True, DIMENSION, "skupriceid.md (1.3 set)"),
    "SubAccountId": _col(CONDITIONAL, STRING, True, DIMENSION, "subaccountid.md (1.3 set)"),
    "SubAccountName": _col(CONDITIONAL, STRING, True, DIMENSION, "subaccountname.md (1.3 set)"),
    "SubAccountType": _col(CONDITIONAL, STRING, True, DIMENSION, "subaccounttype.md (1.3 set)"),
    "Tags": _col(CONDITIONAL, JSON, True, DIMENSION, "tags.md@890970f"),
}

# Key-value columns (attributes/key_value_format.md): values are scalars, never objects or arrays.
KEY_VALUE_COLUMNS = ("Tags", "AllocatedTags", "SkuPriceDetails")
# Unit prices must be non-negative ("Any valid non-negative decimal value").
NON_NEGATIVE_COLUMNS = tuple(c for c, spec in COLUMNS.items() if spec["kind"] == UNIT_PRICE)
# Cost = unit price x PricingQuantity when both are not null (listcost.md, contractedcost.md, pricingquantity.md).
UNIT_PRICE_PRODUCTS = (("ListCost", "ListUnitPrice"), ("ContractedCost", "ContractedUnitPrice"))

_DATETIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # attributes/datetime_format.md: 'YYYY-MM-DDTHH:mm:ssZ'
_DATETIME_SHAPE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_CURRENCY_CODE = re.compile(r"^[A-Z]{3}$")  # attributes/currency_format.md: ISO 4217 three-letter code
_PLACEHOLDERS = ("Not Set", "Not Applicable")  # attributes/null_handling.md names these two as examples
_UTC_ZONES = ("UTC", "Etc/UTC")
_REL_TOL = 1e-9  # float comparisons; Decimal comparisons are exact


# -- Reporting ------------------------------------------------------------------------------------------------------


def _show_value(value):
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).strftime(_DATETIME_FORMAT)
    return repr(value)


def _message(column, rule, text, rows, df, show):
    """One violation line: '<Column>: [<rule>] <text>; <n> row(s), first row <i>: <Col>=<value>, ...'."""
    first = rows[0]
    values = ", ".join(f"{c}={_show_value(df[c][first])}" for c in show if c in df.columns)
    return f"{column}: [{rule}] {text}; {len(rows)} row(s), first row {first}: {values}"


def _flag(out, frame, df, column, rule, text, offending, show=None):
    """Append a violation when the boolean expression ``offending`` holds on some row (null counts as not)."""
    rows = frame.select(offending.fill_null(False).alias("_bad")).to_series().arg_true().to_list()
    if rows:
        out.append(_message(column, rule, text, rows, df, show or (column,)))


def _flag_rows(out, df, column, rule, text, rows, show=None):
    if rows:
        out.append(_message(column, rule, text, rows, df, show or (column,)))


# -- Value helpers --------------------------------------------------------------------------------------------------


def _is_decimal_type(dtype):
    return isinstance(dtype, pl.Decimal)


def _type_ok(dtype, focus_type):
    if dtype == pl.Null:  # an all-null column has no value of the wrong type
        return True
    if focus_type == DECIMAL:
        return _is_decimal_type(dtype) or dtype.is_float()
    if focus_type == DATETIME:
        return dtype == pl.String or (isinstance(dtype, pl.Datetime) and dtype.time_zone in _UTC_ZONES)
    return dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum))


def _datetime_expr(df, column):
    """The column as Datetime(us, UTC), strings parsed with the FOCUS format; None when its type is wrong."""
    dtype = df.schema[column]
    if isinstance(dtype, pl.Datetime) and dtype.time_zone in _UTC_ZONES:
        return pl.col(column).dt.convert_time_zone("UTC").dt.cast_time_unit("us")
    if dtype == pl.String:
        parsed = pl.col(column).str.strptime(pl.Datetime("us"), _DATETIME_FORMAT, strict=False)
        return parsed.dt.replace_time_zone("UTC")
    if dtype == pl.Null:
        return pl.col(column).cast(pl.Datetime("us", "UTC"))
    return None


def _numbers_equal(a, b):
    """Exact when both sides are Decimal; relative tolerance as soon as a float is involved."""
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b
    a, b = float(a), float(b)
    return abs(a - b) <= _REL_TOL * max(1.0, abs(a), abs(b))


def _reject_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError(f"duplicate key {key!r}")
    return dict(pairs)


def _parse_object(text):
    """(object, None) for a serialized JSON object with unique keys, else (None, reason)."""
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError too
        return None, f"not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, None


def _canonical_json(text):
    """Key-order-independent form of a JSON value, for comparing JSON dimensions across rows."""
    if text is None:
        return None
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        return text


# -- Structure: presence, names, order, types -----------------------------------------------------------------------


def _check_structure(df, supported=()):
    out = []
    for column, spec in COLUMNS.items():
        if spec["level"] == MANDATORY and column not in df.columns:
            out.append(f"{column}: [missing-mandatory] Mandatory FOCUS 1.3 column is not present ({spec['source']})")
        elif column in supported and column not in df.columns:
            out.append(
                f"{column}: [missing-supported] {spec['level']} column the data generator supports is not present "
                f"({spec['source']})"
            )
    # skupricedetails.md: "MUST be present ... when the provider supports unit pricing concepts and publishes price
    # lists"; a non-null ListUnitPrice is a published list price.
    if "SkuPriceDetails" not in df.columns and "SkuPriceDetails" not in supported and "ListUnitPrice" in df.columns:
        if df["ListUnitPrice"].null_count() < df.height:
            out.append(
                "SkuPriceDetails: [missing-conditional] MUST be present when unit prices come from a published price "
                "list (ListUnitPrice is not null) (skupricedetails.md)"
            )
    for column in df.columns:
        if column not in COLUMNS and not column.startswith("x_"):
            out.append(
                f"{column}: [unknown-column] not a FOCUS 1.3 Cost and Usage column and not prefixed 'x_' "
                "(column_handling.md)"
            )
    focus_positions = [i for i, c in enumerate(df.columns) if c in COLUMNS]
    if focus_positions:
        last_focus = focus_positions[-1]
        early = [c for i, c in enumerate(df.columns) if c.startswith("x_") and i < last_focus]
        if early:
            out.append(
                f"{early[0]}: [custom-column-order] custom columns SHOULD come after all FOCUS columns "
                f"(column_handling.md); {len(early)} custom column(s) precede {df.columns[last_focus]}"
            )
    return out


def _check_types(df):
    out, typed = [], set()
    for column, spec in COLUMNS.items():
        if column not in df.columns:
            continue
        dtype = df.schema[column]
        if _type_ok(dtype, spec["type"]):
            typed.add(column)
            continue
        wanted = {
            DECIMAL: "a Decimal or Float type",
            DATETIME: "a UTC Datetime or a 'YYYY-MM-DDTHH:mm:ssZ' String",
            STRING: "a String type",
            JSON: "a String holding serialized JSON",
        }[spec["type"]]
        out.append(f"{column}: [type] FOCUS type {spec['type']} needs {wanted}, found {dtype} ({spec['source']})")
    return out, typed


# -- Per-column value rules -----------------------------------------------------------------------------------------


def _check_values(df, typed):
    out = []
    for column, spec in COLUMNS.items():
        if column not in df.columns:
            continue
        col = pl.col(column)
        if not spec["nullable"]:
            _flag(out, df, df, column, "not-null", f"MUST NOT be null ({spec['source']})", col.is_null())
        if column not in typed:
            continue
        if spec["allowed"] is not None:
            text = f"MUST be one of the allowed values ({spec['source']})"
            _flag(
                out,
                df,
                df,
                column,
                "allowed-value",
                text,
                col.is_not_null() & ~col.cast(pl.String).is_in(spec["allowed"]),
            )
        if spec["type"] == STRING:
            text = "MUST be null, not an empty string or a placeholder such as 'Not Set' (null_handling.md)"
            bad = col.cast(pl.String).str.strip_chars().is_in(("", *_PLACEHOLDERS))
            _flag(out, df, df, column, "null-handling", text, bad)
        if spec["type"] == DECIMAL and df.schema[column].is_float():
            text = f"MUST be a valid decimal value, not NaN or infinite ({spec['source']})"
            _flag(out, df, df, column, "valid-decimal", text, col.is_nan() | col.is_infinite())
        if column in NON_NEGATIVE_COLUMNS:
            text = f"MUST be a non-negative decimal value ({spec['source']})"
            _flag(out, df, df, column, "non-negative", text, col < 0)
        if spec["type"] == DATETIME and df.schema[column] == pl.String:
            shaped = col.str.contains(_DATETIME_SHAPE.pattern)
            parses = col.str.strptime(pl.Datetime("us"), _DATETIME_FORMAT, strict=False).is_not_null()
            text = "MUST be a UTC date/time in the format 'YYYY-MM-DDTHH:mm:ssZ' (datetime_format.md)"
            _flag(out, df, df, column, "datetime-format", text, col.is_not_null() & ~(shaped & parses))
    if "BillingCurrency" in typed:
        text = "MUST be an ISO 4217 three-letter national currency code (billingcurrency.md, currency_format.md)"
        bad = ~pl.col("BillingCurrency").cast(pl.String).str.contains(_CURRENCY_CODE.pattern)
        _flag(out, df, df, "BillingCurrency", "currency-code", text, bad)
    return out


# -- JSON columns ---------------------------------------------------------------------------------------------------


def _key_value_error(obj):
    for key, value in obj.items():
        if isinstance(value, (dict, list)):
            return f"value of {key!r} is an {'object' if isinstance(value, dict) else 'array'}"
    return None


def _sku_price_details_error(obj):
    for key in obj:
        if key not in SKU_PRICE_PROPERTIES and not key.startswith("x_"):
            return f"property key {key!r} is neither FOCUS-defined nor prefixed 'x_'"
    return None


def _elements_error(obj):
    elements = obj.get("Elements")
    if not isinstance(elements, list) or not elements:
        return "top-level key 'Elements' must hold a non-empty array"
    if not all(isinstance(e, dict) for e in elements):
        return "every item in 'Elements' must be an object"
    return None


def _allocated_method_details_error(obj):
    error = _elements_error(obj)
    if error:
        return error
    for element in obj["Elements"]:
        ratio = element.get("AllocatedRatio")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            return "every 'Elements' entry must carry a numeric 'AllocatedRatio'"
        if "UsageQuantity" in element and "UsageUnit" not in element:
            return "'UsageUnit' must be present when 'UsageQuantity' is"
        for key in element:
            if key not in ALLOCATION_PROPERTIES and not key.startswith("x_"):
                return f"allocation property key {key!r} is neither FOCUS-defined nor prefixed 'x_'"
    return None


# Per JSON column: (rule id, spec file, validator of a parsed object).
_OBJECT_RULES = {
    "Tags": ("key-value", "tags.md, key_value_format.md", _key_value_error),
    "AllocatedTags": ("key-value", "allocatedtags.md, key_value_format.md", _key_value_error),
    "SkuPriceDetails": ("key-value", "skupricedetails.md, key_value_format.md", _key_value_error),
    "AllocatedMethodDetails": ("object-schema", "allocatedmethoddetails.md", _allocated_method_details_error),
    "ContractApplied": ("object-schema", "contractapplied.md", _elements_error),
}


def _parsed_column(df, column):
    return [None if text is None else _parse_object(text) for text in df[column].to_list()]


def _check_json(df, typed):
    out, parsed = [], {}
    for column, spec in COLUMNS.items():
        if spec["type"] != JSON or column not in typed:
            continue
        values = _parsed_column(df, column)
        parsed[column] = [None if v is None else v[0] for v in values]
        broken = [i for i, v in enumerate(values) if v is not None and v[1] is not None]
        if broken:
            reason = values[broken[0]][1]
            text = f"MUST be a serialized JSON object with unique keys; first is {reason} ({spec['source']})"
            _flag_rows(out, df, column, "json-object", text, broken)
        rule, source, validate = _OBJECT_RULES[column]
        reasons = [(i, validate(obj)) for i, obj in enumerate(parsed[column]) if obj is not None]
        bad = [(i, reason) for i, reason in reasons if reason]
        if bad:
            _flag_rows(out, df, column, rule, f"{bad[0][1]} ({source})", [i for i, _ in bad])
        if column == "SkuPriceDetails":
            keys = [(i, _sku_price_details_error(obj)) for i, obj in enumerate(parsed[column]) if obj is not None]
            bad = [(i, reason) for i, reason in keys if reason]
            if bad:
                _flag_rows(out, df, column, "property-key", f"{bad[0][1]} (skupricedetails.md)", [i for i, _ in bad])
    if "AllocatedTags" in parsed and "Tags" in parsed:
        # allocatedtags.md: "AllocatedTags MUST NOT include resource tags already present in Tags".
        rows = [
            i
            for i, (alloc, tags) in enumerate(zip(parsed["AllocatedTags"], parsed["Tags"], strict=True))
            if alloc and tags and any(k in tags and tags[k] == v for k, v in alloc.items())
        ]
        text = "MUST NOT include tags already present in Tags (allocatedtags.md)"
        _flag_rows(out, df, "AllocatedTags", "duplicates-tags", text, rows, ("AllocatedTags", "Tags"))
    return out


# -- Conditional nullability and cross-column rules -----------------------------------------------------------------

_C = pl.col
_NOT_CORRECTION = _C("ChargeClass").is_null() | (_C("ChargeClass") != "Correction")
_USAGE_OR_PURCHASE = _C("ChargeCategory").is_in(("Usage", "Purchase"))
_BILLABLE = _USAGE_OR_PURCHASE & _NOT_CORRECTION
_TAX = _C("ChargeCategory") == "Tax"
_BILLABLE_TEXT = 'ChargeCategory is "Usage" or "Purchase" and ChargeClass is not "Correction"'


def _null_when(column, text, condition, needs, source):
    return (
        column,
        "null-when",
        f"MUST be null when {text} ({source})",
        (column, *needs),
        _C(column).is_not_null() & condition,
    )


def _not_null_when(column, text, condition, needs, source):
    return (
        column,
        "not-null-when",
        f"MUST NOT be null when {text} ({source})",
        (column, *needs),
        _C(column).is_null() & condition,
    )


def _null_iff(column, other, source):
    text = f"MUST be null exactly when {other} is null ({source})"
    return column, "null-iff", text, (column, other), _C(column).is_null() != _C(other).is_null()


def _priced_rules(column, source):
    """The four nullability bullets shared by unit prices and PricingQuantity-like columns."""
    return [
        _null_when(column, "SkuPriceId is null", _C("SkuPriceId").is_null(), ("SkuPriceId",), source),
        _null_when(column, 'ChargeCategory is "Tax"', _TAX, ("ChargeCategory",), source),
        _not_null_when(column, "SkuPriceId is not null", _C("SkuPriceId").is_not_null(), ("SkuPriceId",), source),
        _not_null_when(column, _BILLABLE_TEXT, _BILLABLE, ("ChargeCategory", "ChargeClass"), source),
    ]


def _conditional_rules():
    """(column, rule id, text, columns needed, offending expression); runs only when all its columns exist."""
    unused = _C("CommitmentDiscountStatus") == "Unused"
    rules = [
        _null_when(
            "PricingQuantity", "SkuPriceId is null", _C("SkuPriceId").is_null(), ("SkuPriceId",), "pricingquantity.md"
        ),
        _null_when("PricingQuantity", 'ChargeCategory is "Tax"', _TAX, ("ChargeCategory",), "pricingquantity.md"),
        _not_null_when(
            "PricingQuantity", _BILLABLE_TEXT, _BILLABLE, ("ChargeCategory", "ChargeClass"), "pricingquantity.md"
        ),
        _null_iff("PricingUnit", "PricingQuantity", "pricingunit.md"),
        *_priced_rules("ListUnitPrice", "listunitprice.md"),
        *_priced_rules("ContractedUnitPrice", "contractedunitprice.md"),
        *_priced_rules("PricingCurrencyListUnitPrice", "pricingcurrencylistunitprice.md"),
        *_priced_rules("PricingCurrencyContractedUnitPrice", "pricingcurrencycontractedunitprice.md"),
        _null_when(
            "PricingCategory", "SkuPriceId is null", _C("SkuPriceId").is_null(), ("SkuPriceId",), "pricingcategory.md"
        ),
        _null_when("PricingCategory", 'ChargeCategory is "Tax"', _TAX, ("ChargeCategory",), "pricingcategory.md"),
        _not_null_when(
            "PricingCategory", _BILLABLE_TEXT, _BILLABLE, ("ChargeCategory", "ChargeClass"), "pricingcategory.md"
        ),
        _null_when("SkuId", 'ChargeCategory is "Tax"', _TAX, ("ChargeCategory",), "skuid.md"),
        _not_null_when("SkuId", _BILLABLE_TEXT, _BILLABLE, ("ChargeCategory", "ChargeClass"), "skuid.md"),
        _null_when("SkuPriceId", 'ChargeCategory is "Tax"', _TAX, ("ChargeCategory",), "skupriceid.md"),
        _not_null_when("SkuPriceId", _BILLABLE_TEXT, _BILLABLE, ("ChargeCategory", "ChargeClass"), "skupriceid.md"),
        _null_when("SkuMeter", "SkuId is null", _C("SkuId").is_null(), ("SkuId",), "skumeter.md"),
        _null_when(
            "SkuPriceDetails", "SkuPriceId is null", _C("SkuPriceId").is_null(), ("SkuPriceId",), "skupricedetails.md"
        ),
        # consumedquantity.md; a dataset without CommitmentDiscountStatus has no "Unused" commitment rows.
        _null_when(
            "ConsumedQuantity", "SkuPriceId is null", _C("SkuPriceId").is_null(), ("SkuPriceId",), "consumedquantity.md"
        ),
        _null_when(
            "ConsumedQuantity",
            'ChargeCategory is not "Usage" or CommitmentDiscountStatus is "Unused"',
            (_C("ChargeCategory") != "Usage") | unused,
            ("ChargeCategory", "CommitmentDiscountStatus"),
            "consumedquantity.md",
        ),
        _not_null_when(
            "ConsumedQuantity",
            'ChargeCategory is "Usage", CommitmentDiscountStatus is not "Unused" and ChargeClass is not "Correction"',
            (_C("ChargeCategory") == "Usage") & ~unused.fill_null(False) & _NOT_CORRECTION,
            ("ChargeCategory", "ChargeClass", "CommitmentDiscountStatus"),
            "consumedquantity.md",
        ),
        _null_iff("ConsumedUnit", "ConsumedQuantity", "consumedunit.md"),
        _null_iff("ResourceType", "ResourceId", "resourcetype.md"),
        _null_when(
            "ResourceName", "ResourceId is null", _C("ResourceId").is_null(), ("ResourceId",), "resourcename.md"
        ),
        _null_iff("RegionName", "RegionId", "regionname.md"),
        _null_iff("SubAccountName", "SubAccountId", "subaccountname.md"),
        _null_iff("SubAccountType", "SubAccountId", "subaccounttype.md"),
        _null_iff("BillingAccountType", "BillingAccountId", "billingaccounttype.md"),
        _null_iff("CommitmentDiscountCategory", "CommitmentDiscountId", "commitmentdiscountcategory.md"),
        _null_iff("CommitmentDiscountType", "CommitmentDiscountId", "commitmentdiscounttype.md"),
        _null_when(
            "CommitmentDiscountName",
            "CommitmentDiscountId is null",
            _C("CommitmentDiscountId").is_null(),
            ("CommitmentDiscountId",),
            "commitmentdiscountname.md",
        ),
        _null_when(
            "CommitmentDiscountStatus",
            "CommitmentDiscountId is null",
            _C("CommitmentDiscountId").is_null(),
            ("CommitmentDiscountId",),
            "commitmentdiscountstatus.md",
        ),
        _not_null_when(
            "CommitmentDiscountStatus",
            'CommitmentDiscountId is not null and ChargeCategory is "Usage"',
            _C("CommitmentDiscountId").is_not_null() & (_C("ChargeCategory") == "Usage"),
            ("CommitmentDiscountId", "ChargeCategory"),
            "commitmentdiscountstatus.md",
        ),
        _null_when(
            "CommitmentDiscountQuantity",
            'SkuPriceId is null, or unless ChargeCategory is "Usage"/"Purchase" with a CommitmentDiscountId',
            _C("SkuPriceId").is_null() | ~(_USAGE_OR_PURCHASE & _C("CommitmentDiscountId").is_not_null()),
            ("SkuPriceId", "ChargeCategory", "CommitmentDiscountId"),
            "commitmentdiscountquantity.md",
        ),
        _not_null_when(
            "CommitmentDiscountQuantity",
            f"CommitmentDiscountId is not null and {_BILLABLE_TEXT}",
            _C("CommitmentDiscountId").is_not_null() & _BILLABLE,
            ("CommitmentDiscountId", "ChargeCategory", "ChargeClass"),
            "commitmentdiscountquantity.md",
        ),
        _null_iff("CommitmentDiscountUnit", "CommitmentDiscountQuantity", "commitmentdiscountunit.md"),
        _null_when(
            "CapacityReservationStatus",
            "CapacityReservationId is null",
            _C("CapacityReservationId").is_null(),
            ("CapacityReservationId",),
            "capacityreservationstatus.md",
        ),
        _not_null_when(
            "CapacityReservationStatus",
            'CapacityReservationId is not null and ChargeCategory is "Usage"',
            _C("CapacityReservationId").is_not_null() & (_C("ChargeCategory") == "Usage"),
            ("CapacityReservationId", "ChargeCategory"),
            "capacityreservationstatus.md",
        ),
        # A charge not related to a split cost allocation has AllocatedMethodId null, and then every Allocated*
        # column is null too.
        _null_when(
            "AllocatedResourceId",
            "AllocatedMethodId is null",
            _C("AllocatedMethodId").is_null(),
            ("AllocatedMethodId",),
            "allocatedresourceid.md",
        ),
        _null_iff("AllocatedResourceName", "AllocatedResourceId", "allocatedresourcename.md"),
        _null_when(
            "AllocatedMethodDetails",
            "AllocatedMethodId is null",
            _C("AllocatedMethodId").is_null(),
            ("AllocatedMethodId",),
            "allocatedmethoddetails.md",
        ),
        _null_when(
            "AllocatedTags",
            "AllocatedMethodId is null",
            _C("AllocatedMethodId").is_null(),
            ("AllocatedMethodId",),
            "allocatedtags.md",
        ),
        # hostprovidername.md allows null only for services with no underlying infrastructure or when the host
        # cannot be determined (e.g. Tax, Adjustment); a charge for a resource is deployed somewhere.
        _not_null_when(
            "HostProviderName",
            'the charge is for a resource (ResourceId not null) and ChargeCategory is not "Tax" or "Adjustment"',
            _C("ResourceId").is_not_null() & ~_C("ChargeCategory").is_in(("Tax", "Adjustment")),
            ("ResourceId", "ChargeCategory"),
            "hostprovidername.md",
        ),
        (
            "ChargeFrequency",
            "purchase-frequency",
            'MUST NOT be "Usage-Based" when ChargeCategory is "Purchase" (chargefrequency.md)',
            ("ChargeFrequency", "ChargeCategory"),
            (_C("ChargeFrequency") == "Usage-Based") & (_C("ChargeCategory") == "Purchase"),
        ),
        (
            "ServiceSubcategory",
            "parent-category",
            "MUST have the parent ServiceCategory given in the allowed values (servicesubcategory.md)",
            ("ServiceSubcategory", "ServiceCategory"),
            _C("ServiceSubcategory")
            .cast(pl.String)
            .replace_strict(SERVICE_SUBCATEGORY_PARENT, default=None, return_dtype=pl.String)
            != _C("ServiceCategory").cast(pl.String),
        ),
    ]
    return rules


# Columns whose absence means "no such rows" for the rules above rather than "cannot tell".
_ABSENT_MEANS_NULL = ("ChargeClass", "CommitmentDiscountStatus")


def _valid_context(column):
    """Rows whose value in ``column`` is usable as a condition: null or an allowed value."""
    allowed = COLUMNS[column]["allowed"]
    if allowed is None:
        return pl.lit(True)
    return _C(column).is_null() | _C(column).cast(pl.String).is_in(allowed)


def _check_conditional(df):
    out = []
    frame = df.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in _ABSENT_MEANS_NULL if c not in df.columns)
    for column, rule, text, needs, offending in _conditional_rules():
        if not all(c in frame.columns for c in needs) or column not in df.columns:
            continue
        # A row whose condition column holds an invalid value is already reported under allowed-value.
        for context in needs[1:]:
            offending = offending & _valid_context(context)
        if rule == "parent-category":
            offending = offending & _valid_context("ServiceSubcategory")
        show = tuple(c for c in needs if c in df.columns)
        _flag(out, frame, df, column, rule, text, offending, show)
    return out


def _check_unit_price_products(df, typed):
    out = []
    for cost, price in UNIT_PRICE_PRODUCTS:
        if not {cost, price, "PricingQuantity"} <= typed:
            continue
        triples = zip(df[cost].to_list(), df[price].to_list(), df["PricingQuantity"].to_list(), strict=True)
        rows = []
        for i, (c, p, q) in enumerate(triples):
            if c is None or p is None or q is None:
                continue
            product = p * q if isinstance(p, Decimal) and isinstance(q, Decimal) else float(p) * float(q)
            if not _numbers_equal(c, product):
                rows.append(i)
        text = f"MUST equal {price} x PricingQuantity when both are not null ({COLUMNS[cost]['source']})"
        _flag_rows(out, df, cost, "unit-price-product", text, rows, (cost, price, "PricingQuantity"))
    return out


def _check_periods(df, typed):
    out = []
    names = ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingPeriodEnd")
    exprs = {c: _datetime_expr(df, c) for c in names if c in typed}
    frame = df.with_columns(e.alias(f"_{c}") for c, e in exprs.items())
    if {"ChargePeriodStart", "ChargePeriodEnd"} <= exprs.keys():
        text = "MUST be before ChargePeriodEnd (inclusive start, exclusive end; chargeperiodstart.md)"
        bad = _C("_ChargePeriodStart") >= _C("_ChargePeriodEnd")
        _flag(out, frame, df, "ChargePeriodStart", "period-order", text, bad, ("ChargePeriodStart", "ChargePeriodEnd"))
    if set(names) <= exprs.keys():
        # gpuledger policy (FOCUS states no such MUST): a charge lies inside the billing period it is invoiced in.
        # Corrections to a previously invoiced period carry that earlier charge period, so they are exempt.
        text = "charge period MUST lie within [BillingPeriodStart, BillingPeriodEnd] for non-correction charges"
        outside = (_C("_ChargePeriodStart") < _C("_BillingPeriodStart")) | (
            _C("_ChargePeriodEnd") > _C("_BillingPeriodEnd")
        )
        not_correction = _NOT_CORRECTION if "ChargeClass" in df.columns else pl.lit(True)
        _flag(out, frame, df, "ChargePeriodStart", "within-billing-period", text, outside & not_correction, names)
    return out


# (column reported, grouping column, column that must have one value per group, rule, text): many-to-one rules.
_ASSOCIATIONS = (
    (
        "InvoiceId",
        "InvoiceId",
        "BillingAccountId",
        "one-billing-account",
        "MUST be associated with one and only one BillingAccountId (invoiceid.md)",
    ),
    (
        "SkuPriceDetails",
        "SkuPriceId",
        "SkuPriceDetails",
        "one-per-sku-price",
        "MUST be associated with a given SkuPriceId: one SkuPriceDetails per SkuPriceId (skupricedetails.md)",
    ),
)


def _check_associations(df, typed):
    """Each value of the grouping column goes with one value of the other (rows with a null in either left out)."""
    out = []
    for column, group, value, rule, text in _ASSOCIATIONS:
        if not {group, value} <= typed:
            continue
        groups = df[group].to_list()
        values = [_canonical_json(v) if COLUMNS[value]["type"] == JSON else v for v in df[value].to_list()]
        seen = {}
        for g, v in zip(groups, values, strict=True):
            if g is not None and v is not None:
                seen.setdefault(g, set()).add(v)
        split = {g for g, vs in seen.items() if len(vs) > 1}
        rows = [i for i, (g, v) in enumerate(zip(groups, values, strict=True)) if g in split and v is not None]
        _flag_rows(out, df, column, rule, text, rows, (group, value))
    return out


def check_focus(df: pl.DataFrame, supported: tuple[str, ...] = ()) -> list[str]:
    """Every FOCUS 1.3 Cost and Usage violation in ``df``, one line each: '<Column>: [<rule>] <text>; ...'.

    Row-level lines give the number of offending rows and the first offending row index (0-based) with its values.
    Value rules are skipped for a column whose type is wrong (that is reported once under [type]). ``supported``
    names Conditional or Recommended columns the data generator supports, which must then be present.
    """
    out = _check_structure(df, supported)
    type_errors, typed = _check_types(df)
    out += type_errors
    out += _check_values(df, typed)
    out += _check_json(df, typed)
    out += _check_conditional(df)
    out += _check_unit_price_products(df, typed)
    out += _check_periods(df, typed)
    out += _check_associations(df, typed)
    return out


# -- Split cost allocation ------------------------------------------------------------------------------------------

# Columns a dataset must carry when the data generator supports split cost allocation (each file's presence bullet).
SPLIT_COLUMNS = ("AllocatedMethodId", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags")
SUMMABLE_METRICS = tuple(c for c, spec in COLUMNS.items() if spec["kind"] == METRIC)
# Columns that legitimately differ between the allocated charges of one origin: the Allocated* columns describe the
# split itself, ContractApplied carries per-charge applied costs, and Tags has its own rule below.
_SPLIT_EXEMPT = ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName")
_SPLIT_EXEMPT += ("AllocatedTags", "ContractApplied", "Tags")
_SPLIT_SOURCE = "data_generator_calculated_split_cost_allocation_handling.md"


def _origin_label(row, origin_key):
    return "origin (" + ", ".join(f"{k}={_show_value(row[k])}" for k in origin_key) + ")"


def _normalise(df, origin_key):
    """Row index, DateTime columns as UTC datetimes and JSON columns in canonical form, for grouping and comparing."""
    exprs = [pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row")]
    for column, spec in COLUMNS.items():
        if column not in df.columns:
            continue
        if spec["type"] == DATETIME and _datetime_expr(df, column) is not None:
            exprs.append(_datetime_expr(df, column).alias(column))
        if spec["type"] == JSON and df.schema[column] == pl.String:
            exprs.append(_C(column).map_elements(_canonical_json, return_dtype=pl.String).alias(column))
    return df.with_columns(exprs)


def _ratio_sum(text):
    obj, error = (None, "null") if text is None else _parse_object(text)
    if error or _allocated_method_details_error(obj):
        return None
    return float(sum(e["AllocatedRatio"] for e in obj["Elements"]))


def _split_consistency(split, origin_key, origins_columns):
    """Dimensions, unit prices and Tags equal across the allocated charges of each origin (no origin frame needed)."""
    out = []
    compared = [
        c
        for c, spec in COLUMNS.items()
        if c in split.columns
        and c not in origin_key
        and c not in _SPLIT_EXEMPT
        and spec["kind"] in (DIMENSION, UNIT_PRICE)
    ]
    # Columns the origin frame also carries are compared with the origin instead (that implies equality here too).
    compared = [c for c in compared if c not in origins_columns]
    compared += ["Tags"] if "Tags" in split.columns else []  # a dimension: equal across the split in any case
    if not compared:
        return out
    groups = split.group_by(origin_key, maintain_order=True).agg(
        pl.col("_row").first(), *(pl.col(c).n_unique().alias(c) for c in compared)
    )
    for column in compared:
        bad = groups.filter(pl.col(column) > 1)
        if bad.height:
            first = bad.row(0, named=True)
            if column == "Tags":
                rule, what = "split-tags", "the origin's Tags (same keys and values)"
            elif COLUMNS[column]["kind"] == UNIT_PRICE:
                rule, what = "split-non-summable", "one value (a non-summable metric equals the origin's)"
            else:
                rule, what = "split-dimension", "one value (a dimension equals the origin's)"
            out.append(
                f"{column}: [{rule}] allocated charges of one origin MUST share {what} ({_SPLIT_SOURCE}); "
                f"{bad.height} origin(s), first {_origin_label(first, origin_key)} at row {first['_row']}"
            )
    return out


def _split_unallocated(split, origin_key):
    if "AllocatedResourceId" not in split.columns:
        return []
    groups = split.group_by(origin_key, maintain_order=True).agg(
        pl.col("_row").first(), pl.col("AllocatedResourceId").is_null().sum().alias("_unallocated")
    )
    bad = groups.filter(pl.col("_unallocated") > 1)
    if not bad.height:
        return []
    first = bad.row(0, named=True)
    return [
        f"AllocatedResourceId: [unallocated-portion] at most one allocated charge per origin may carry the "
        f"unallocated portion (AllocatedResourceId null; allocatedresourceid.md); {bad.height} origin(s), first "
        f"{_origin_label(first, origin_key)} has {first['_unallocated']} at row {first['_row']}"
    ]


def _split_ratios(split, origin_key):
    if "AllocatedMethodDetails" not in split.columns or split.schema["AllocatedMethodDetails"] != pl.String:
        return []
    ratios = split.with_columns(
        pl.col("AllocatedMethodDetails").map_elements(_ratio_sum, return_dtype=pl.Float64).alias("_ratio")
    )
    groups = ratios.group_by(origin_key, maintain_order=True).agg(
        pl.col("_row").first(), pl.col("_ratio").sum().alias("_total"), pl.col("_ratio").null_count().alias("_n")
    )
    # Rows without a usable AllocatedMethodDetails are reported by check_focus; only complete origins are summed.
    bad = [r for r in groups.iter_rows(named=True) if r["_n"] == 0 and not _numbers_equal(r["_total"], 1.0)]
    if not bad:
        return []
    first = bad[0]
    return [
        f"AllocatedMethodDetails: [ratio-sum] AllocatedRatio across the allocated charges of one origin MUST sum to 1 "
        f"(allocatedmethoddetails.md); {len(bad)} origin(s), first {_origin_label(first, origin_key)} sums to "
        f"{first['_total']!r} at row {first['_row']}"
    ]


def _origin_kept(split, rest, origin_key):
    kept = rest.join(split.select(origin_key).unique(), on=origin_key, how="semi", nulls_equal=True)
    if not kept.height:
        return []
    first = kept.row(0, named=True)
    return [
        f"AllocatedMethodId: [origin-not-replaced] a charge with AllocatedMethodId null shares the origin key of "
        f"allocated charges: the origin charge is replaced by its allocated charges, not kept ({_SPLIT_SOURCE}); "
        f"{kept.height} row(s), first row {first['_row']}: {_origin_label(first, origin_key)}"
    ]


def _against_origins(split, origins, origin_key):
    """Sums of summable metrics, dimensions, unit prices and Tags of the allocated charges against the origins."""
    out = []
    missing = split.join(origins, on=origin_key, how="anti", nulls_equal=True)
    if missing.height:
        first = missing.row(0, named=True)
        out.append(
            f"AllocatedMethodId: [origin-missing] allocated charges whose origin is not in the origins frame; "
            f"{missing.select(origin_key).unique().height} origin(s), first {_origin_label(first, origin_key)} "
            f"at row {first['_row']}"
        )
    orphan = origins.join(split, on=origin_key, how="anti", nulls_equal=True)
    if orphan.height:
        first = orphan.row(0, named=True)
        out.append(
            f"AllocatedMethodId: [no-allocated-charges] origin charges without allocated charges; {orphan.height} "
            f"origin(s), first {_origin_label(first, origin_key)}"
        )
    metrics = [c for c in SUMMABLE_METRICS if c in split.columns and c in origins.columns]
    sums = split.group_by(origin_key, maintain_order=True).agg(
        pl.col("_row").first(),
        *(pl.col(m).sum().alias(m) for m in metrics),
        *(pl.col(m).is_not_null().sum().alias(f"_n_{m}") for m in metrics),
    )
    joined = sums.join(origins, on=origin_key, how="inner", suffix="_origin", nulls_equal=True)
    for metric in metrics:
        bad = []
        for row in joined.iter_rows(named=True):
            allocated = row[metric] if row[f"_n_{metric}"] else None
            origin = row[f"{metric}_origin"]
            if (allocated is None) != (origin is None) or (
                origin is not None and not _numbers_equal(allocated, origin)
            ):
                bad.append((row, allocated, origin))
        if bad:
            row, allocated, origin = bad[0]
            out.append(
                f"{metric}: [split-sum] allocated charges MUST sum to the origin charge for a summable metric "
                f"({_SPLIT_SOURCE}); {len(bad)} origin(s), first {_origin_label(row, origin_key)}: allocated sum "
                f"{allocated!r} != origin {origin!r} (first allocated row {row['_row']})"
            )
    compared = [
        c
        for c, spec in COLUMNS.items()
        if c in split.columns
        and c in origins.columns
        and c not in origin_key
        and c not in _SPLIT_EXEMPT
        and spec["kind"] in (DIMENSION, UNIT_PRICE)
    ]
    rows = split.join(
        origins.select(*origin_key, *compared), on=origin_key, how="inner", suffix="_origin", nulls_equal=True
    )
    for column in compared:
        bad = rows.filter(pl.col(column).ne_missing(pl.col(f"{column}_origin")))
        if bad.height:
            first = bad.row(0, named=True)
            rule = "split-non-summable" if COLUMNS[column]["kind"] == UNIT_PRICE else "split-dimension"
            out.append(
                f"{column}: [{rule}] MUST match the origin charge in every allocated charge ({_SPLIT_SOURCE}); "
                f"{bad.height} row(s), first row {first['_row']}: {first[column]!r} != origin "
                f"{first[column + '_origin']!r}"
            )
    if "Tags" in split.columns and "Tags" in origins.columns:
        tagged = split.join(
            origins.select(*origin_key, "Tags"), on=origin_key, how="inner", suffix="_origin", nulls_equal=True
        )
        bad = []
        for row in tagged.iter_rows(named=True):
            mine = _parse_object(row["Tags"])[0] if row["Tags"] else {}
            theirs = _parse_object(row["Tags_origin"])[0] if row["Tags_origin"] else {}
            if mine is None or theirs is None:  # unparseable Tags are reported by check_focus
                continue
            if any(k not in mine or mine[k] != v for k, v in theirs.items()):
                bad.append(row)
        if bad:
            out.append(
                f"Tags: [split-tags] allocated charges MUST include the keys and values of the origin's Tags "
                f"({_SPLIT_SOURCE}); {len(bad)} row(s), first row {bad[0]['_row']}: {bad[0]['Tags']!r} lacks part of "
                f"{bad[0]['Tags_origin']!r}"
            )
    return out


def check_split_allocation(df: pl.DataFrame, origin_key: list[str], origins: pl.DataFrame | None = None) -> list[str]:
    """Data generator-calculated split cost allocation rules of FOCUS 1.3, one violation per line.

    ``df`` is the FOCUS dataset; its allocated charges are the rows with AllocatedMethodId not null.  ``origin_key``
    names the columns that identify the origin charge an allocated charge came from (for gpuledger: ResourceId,
    ChargePeriodStart, ChargePeriodEnd; add SkuPriceId if a resource has several charges per period).  Because FOCUS
    replaces an origin charge by its allocated charges, the origins are not in ``df``: pass them as ``origins`` (one
    row per origin: the key columns plus any FOCUS columns of the origin charge) to check that summable metrics sum to
    the origin and that dimensions, unit prices and Tags match it.  Without ``origins`` the checks that need no origin
    still run: the required columns exist, dimensions and unit prices agree across the allocated charges of one
    origin, at most one unallocated portion per origin, AllocatedRatio sums to 1, and no origin row was kept.
    """
    missing = [c for c in origin_key if c not in df.columns]
    if missing:
        raise ValueError(f"origin_key columns not in the dataset: {missing}")
    if origins is not None and any(c not in origins.columns for c in origin_key):
        raise ValueError(
            f"origins frame lacks origin_key columns: {[c for c in origin_key if c not in origins.columns]}"
        )
    out = [
        f"{c}: [missing-conditional] MUST be present when the data generator supports split cost allocation "
        f"({COLUMNS[c]['source']})"
        for c in SPLIT_COLUMNS
        if c not in df.columns
    ]
    if "AllocatedMethodId" not in df.columns:
        return out
    frame = _normalise(df, origin_key)
    split = frame.filter(pl.col("AllocatedMethodId").is_not_null())
    rest = frame.filter(pl.col("AllocatedMethodId").is_null())
    origin_frame = None if origins is None else _normalise(origins, origin_key).drop("_row")
    out += _split_consistency(split, origin_key, () if origin_frame is None else origin_frame.columns)
    out += _split_unallocated(split, origin_key)
    out += _split_ratios(split, origin_key)
    out += _origin_kept(split, rest, origin_key)
    if origin_frame is not None:
        out += _against_origins(split, origin_frame, origin_key)
    return out
