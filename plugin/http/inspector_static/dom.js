// The inspector's small DOM helpers. Every string from the API reaches the page through
// them, as text nodes and attribute values, never as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function byTestId(id, root = document) {
  return root.querySelector(`[data-testid="${id}"]`);
}

// An element with attributes and children (strings become text nodes).
function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

function svgElement(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function formatNumber(value, digits = 3) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "—";
}

// A plan's value as text: a list joined by `separator`, an object as JSON.
function formatValue(value, separator = ", ") {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.length ? value.map((item) => formatValue(item)).join(separator) : "—";
  if (typeof value === "number") return formatNumber(value);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}
