-- focus_cost: the GPU cost as a FOCUS 1.3 Cost and Usage dataset (FinOps Open Cost and Usage Specification), with
-- data-generator-calculated split cost allocation. `gpuledger export focus --period YYYY-MM` writes one billing
-- period of it; docs/finops.md describes every column.
--
-- Grain: one allocated charge. Each origin charge (one physical GPU x one charge period: a UTC day, cut where the
-- GPU model's rate changes) is split into one row per job that held the GPU and one row for the unallocated
-- (idle) remainder, AllocatedResourceId null. As the spec's split cost allocation requires, the origin charge
-- itself is not a row: its allocated charges sum to it exactly (quantities are DECIMAL(18, 9) GPU-hours, unit
-- prices DECIMAL(18, 6) USD, costs their exact product; the rounding remainder of the quantities goes to the
-- unallocated row), and they carry its dimensions, unit prices and Tags (the GPU's: cluster, node, model). What
-- each split went to (tenant, namespace, job) is in AllocatedTags, which the spec keeps apart from Tags. Rows of
-- jobs on a GPU nobody named are ordinary charges (no ResourceId, no split), with the job's tags in Tags.
-- A GPU model with no rate has null costs here; the export refuses such a period and names the models.
-- Provider names come from DuckDB variables that `gpuledger` sets from the config's [finops] table; in a plain
-- DuckDB session they default to 'gpuledger' (SET VARIABLE focus_provider_name = 'Platform team'; ...).
-- Built on cost_allocation.
CREATE OR REPLACE VIEW focus_cost AS
WITH charges AS (
    SELECT
        *,
        CAST(round(usd_per_gpu_hour, 6) AS DECIMAL(18, 6)) AS unit_price,
        -- Exact decimals written by the analytics (analytics/cost_allocation.py): the idle row holds the rounding
        -- remainder, so the splits of an origin sum to origin_charge_gpu_hours with no tolerance.
        charge_gpu_hours AS quantity,
        origin_charge_gpu_hours AS origin_quantity,
        gpu_uuid IS NOT NULL AS is_split
    FROM cost_allocation
),
rows AS (
    SELECT
        *,
        CAST(quantity * unit_price AS DECIMAL(38, 15)) AS cost,
        -- The UTC month whatever the session's time zone, from `date` (the UTC day of period_start, a DATE): a
        -- TIMESTAMPTZ would be truncated in the session's zone, and through ICU's calendar at ~0.2 us a row.
        date_trunc('month', date) AS billing_month_utc,
        coalesce(getvariable('focus_provider_name'), 'gpuledger') AS provider,
        coalesce(getvariable('focus_host_provider_name'), getvariable('focus_provider_name'), 'gpuledger') AS host,
        -- The origin's tags, kept on every one of its allocated charges.
        json_object('gpuledger/cluster', cluster, 'gpuledger/node', node, 'gpuledger/gpu_model', gpu_model) AS origin_tags,
        json_object('gpuledger/tenant', coalesce(tenant, ''), 'gpuledger/namespace', coalesce(namespace, ''),
            'gpuledger/job', job_id) AS job_tags
    FROM charges
    WHERE quantity <> 0 OR job_id IS NOT NULL
)
SELECT
    cost AS BilledCost,                                       -- Decimal: quantity x unit price (no discounts)
    CAST(cluster AS VARCHAR) AS BillingAccountId,             -- String: the cluster (one lake may hold several)
    CAST(cluster AS VARCHAR) AS BillingAccountName,           -- String: the cluster
    'USD' AS BillingCurrency,                                 -- String: ISO 4217
    to_timestamp(epoch(billing_month_utc + INTERVAL 1 MONTH)) AS BillingPeriodEnd, -- DateTime: end of the UTC month
    to_timestamp(epoch(billing_month_utc)) AS BillingPeriodStart, -- DateTime: first instant of the UTC month
    'Usage' AS ChargeCategory,                                -- String: GPU time used (or held idle)
    CAST(NULL AS VARCHAR) AS ChargeClass,                     -- String: null (no corrections are issued)
    'GPU-hours of ' || coalesce(gpu_model, 'unknown model') || ' on ' || coalesce(node, 'an unknown node')
        AS ChargeDescription,                                 -- String: what the origin charge is for
    'Usage-Based' AS ChargeFrequency,                         -- String
    period_end AS ChargePeriodEnd,                            -- DateTime: exclusive end of the charge period (UTC)
    period_start AS ChargePeriodStart,                        -- DateTime: start of the charge period (UTC)
    quantity AS ConsumedQuantity,                             -- Decimal: GPU-hours held (or left idle)
    'GPU-Hours' AS ConsumedUnit,                              -- String
    cost AS ContractedCost,                                   -- Decimal: ContractedUnitPrice x PricingQuantity
    unit_price AS ContractedUnitPrice,                        -- Decimal: USD per GPU-hour (the rate card)
    cost AS EffectiveCost,                                    -- Decimal: no discounts or prepayments
    host AS HostProviderName,                                 -- String: who hosts the GPUs ([finops] host_provider_name)
    -- The monthly chargeback of the billing account is the invoice (provisional until the month ends): one id per
    -- cluster and month, so each InvoiceId belongs to exactly one BillingAccountId.
    CAST(cluster AS VARCHAR) || '/' || strftime(billing_month_utc, '%Y-%m') AS InvoiceId, -- String: cluster/YYYY-MM
    provider AS InvoiceIssuerName,                            -- String: [finops] provider_name
    cost AS ListCost,                                         -- Decimal: ListUnitPrice x PricingQuantity
    unit_price AS ListUnitPrice,                              -- Decimal: USD per GPU-hour (the rate card)
    'Standard' AS PricingCategory,                            -- String: the rate card's standard price
    quantity AS PricingQuantity,                              -- Decimal: GPU-hours priced
    'GPU-Hours' AS PricingUnit,                               -- String
    provider AS ProviderName,                                 -- String: deprecated in 1.3 (ServiceProviderName)
    provider AS PublisherName,                                -- String: deprecated in 1.3
    CASE WHEN is_split THEN gpu_uuid END AS ResourceId,       -- String: the physical GPU's UUID
    CASE WHEN is_split THEN gpu_uuid END AS ResourceName,     -- String: the GPU's UUID
    CASE WHEN is_split THEN 'GPU' END AS ResourceType,        -- String
    'Compute' AS ServiceCategory,                             -- String: GPU capacity is compute
    'GPU Compute' AS ServiceName,                             -- String
    provider AS ServiceProviderName,                          -- String: [finops] provider_name
    'Other (Compute)' AS ServiceSubcategory,                  -- String: a subcategory of Compute
    coalesce(rate_model, gpu_model) AS SkuId,                 -- String: the rate card entry
    'GPU Time' AS SkuMeter,                                   -- String
    -- The rate card is the price list: one GPU per GPU-hour priced, and the [[rates]] entry that priced it. Null
    -- exactly when SkuPriceId is (no rate); no price or date in it, so every charge of a SkuPriceId has the same.
    CASE WHEN unit_price IS NOT NULL AND coalesce(rate_model, gpu_model) IS NOT NULL THEN CAST(json_object(
        'GpuCount', 1, 'x_RateCardModel', coalesce(rate_model, gpu_model)) AS VARCHAR)
    END AS SkuPriceDetails,                                   -- JSON: FOCUS GpuCount, and x_RateCardModel
    coalesce(rate_model, gpu_model) || '@' || CAST(unit_price AS VARCHAR) AS SkuPriceId, -- String: SKU and price
    -- The cluster is also the sub-account, the grouping FOCUS tools break cost down by (docs/finops.md says why).
    CAST(cluster AS VARCHAR) AS SubAccountId,                 -- String: the cluster
    CAST(cluster AS VARCHAR) AS SubAccountName,               -- String: the cluster
    'Cluster' AS SubAccountType,                              -- String: what a sub-account is here
    CAST(CASE
        WHEN is_split THEN origin_tags  -- a dimension: the same on every split of one origin
        ELSE json_merge_patch(origin_tags, job_tags)
    END AS VARCHAR) AS Tags,                                  -- JSON: the GPU's tags (and the job's, when no split)
    CASE WHEN is_split THEN 'gpuledger-' || method || '-v1' END AS AllocatedMethodId, -- String: docs/finops.md
    CASE WHEN is_split THEN CAST(json_object(
        'Elements', json_array(json_object(
            'AllocatedRatio', CASE WHEN origin_quantity > 0 THEN CAST(quantity AS DOUBLE) / CAST(origin_quantity AS DOUBLE)
                                   ELSE 0.0 END,
            'UsageUnit', 'GPU-Hours',
            'UsageQuantity', CAST(quantity AS DOUBLE))),
        'x_Basis', CASE WHEN method = 'max' THEN 'max(share, used) x time, per hour' ELSE 'share x time' END,
        'x_Unallocated', 'origin GPU-hours minus the jobs'' GPU-hours') AS VARCHAR)
    END AS AllocatedMethodDetails,                            -- JSON: the split's ratio of its origin, and why
    CASE WHEN is_split AND job_id IS NOT NULL THEN job_id END AS AllocatedResourceId, -- String: the job; null: idle
    CASE WHEN is_split AND job_id IS NOT NULL THEN coalesce(pod, job_id) END AS AllocatedResourceName, -- String
    CASE WHEN is_split AND job_id IS NOT NULL THEN CAST(job_tags AS VARCHAR)
    END AS AllocatedTags,                                     -- JSON: the tenant, namespace and job of the split
    tenant AS x_Tenant,                                       -- tenant of the job (null: unallocated)
    namespace AS x_Namespace,                                 -- Kubernetes namespace
    job_id AS x_JobId,                                        -- job id
    pod AS x_Pod,                                             -- pod name
    node AS x_Node,                                           -- node of the GPU
    gpu_model AS x_GpuModel,                                  -- GPU model
    vendor AS x_GpuVendor,                                    -- nvidia, amd or huawei (null: a model no rule names)
    slice_uuid AS x_SliceId,                                  -- MIG instance the job held, when not the whole GPU
    job_id IS NULL AS x_Unallocated,                          -- true on the idle remainder of a GPU
    method AS x_CostMethod                                    -- request or max (analytics.cost_method)
FROM rows;
