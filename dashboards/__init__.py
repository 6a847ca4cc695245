"""dashboards: the Dash app for management. Reads the lake through gpuledger.query; never writes."""
