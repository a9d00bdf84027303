"use strict";

// A URL slug of a title.
function slugify(title) {
  return title.toLowerCase().replace(/[^a-z0-9]/g, "-");
}

module.exports = { slugify };
