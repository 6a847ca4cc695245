"""One module per page: PATH, NAME, layout(ctx, filters) and, where a page has controls of its own, register."""
