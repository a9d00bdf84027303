#!/bin/bash
set -e
cat > /app/slugify.js <<'JS'
"use strict";

// A URL slug of a title.
function slugify(title) {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

module.exports = { slugify };
JS
