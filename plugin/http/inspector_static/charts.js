// The inspector's charts, drawn as inline SVG: horizontal bars for a hit's features and
// weights, and the mood (pleasure, arousal, dominance) over a conversation's turns.
"use strict";

const MOOD_DIMS = [
  ["pleasure", "#2f9e44"],
  ["arousal", "#e8590c"],
  ["dominance", "#1c7ed6"],
];

// Horizontal bars, one per entry: the label, a bar on a 0-1 scale (most features and weights
// live there) and the value. A magnitude over 1 (a BM25 score, a word count) fills the track
// and is marked "over" rather than shrinking every other bar. Each bar's group carries its
// name and value.
function barChart(entries, testId, itemTestId) {
  const rowHeight = 20;
  const labelWidth = 100;
  const barWidth = 160;
  const width = labelWidth + barWidth + 60;
  const height = Math.max(entries.length, 1) * rowHeight + 4;
  const svg = svgElement("svg", { "data-testid": testId, class: "bars", width, height, viewBox: `0 0 ${width} ${height}` });
  if (!entries.length) svg.append(svgElement("text", { x: 0, y: 15, class: "bar-value" }, "none"));
  entries.forEach(([name, value], index) => {
    const y = index * rowHeight + 2;
    const number = typeof value === "number" && Number.isFinite(value) ? value : null;
    const magnitude = number === null ? 0 : Math.abs(number);
    const classes = ["bar"];
    if (number !== null && number < 0) classes.push("negative");
    if (magnitude > 1) classes.push("over");
    const group = svgElement("g", {
      "data-testid": itemTestId,
      "data-name": name,
      "data-value": number === null ? "" : String(number),
    });
    group.append(
      svgElement("text", { x: labelWidth - 6, y: y + 14, class: "bar-label", "text-anchor": "end" }, name),
      svgElement("rect", { x: labelWidth, y: y + 3, width: barWidth, height: rowHeight - 6, class: "bar-track" }),
      svgElement("rect", { x: labelWidth, y: y + 3, width: Math.min(magnitude, 1) * barWidth, height: rowHeight - 6, class: classes.join(" ") }),
      svgElement("text", { x: labelWidth + barWidth + 6, y: y + 14, class: "bar-value" }, formatNumber(number)),
    );
    svg.append(group);
  });
  return svg;
}

// Pleasure, arousal and dominance (each in [-1, 1]) over turns: a line per dimension and a
// circle per turn per dimension.
function renderMoodPlot(svg, legend, turns) {
  const width = 480;
  const height = 240;
  const margin = { left: 40, right: 16, top: 12, bottom: 28 };
  const plotWidth = width - margin.left - margin.right;
  const plotHeight = height - margin.top - margin.bottom;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const x = (i) => margin.left + (turns.length > 1 ? (i / (turns.length - 1)) * plotWidth : plotWidth / 2);
  const y = (v) => margin.top + ((1 - Math.max(-1, Math.min(1, v))) / 2) * plotHeight;
  for (const tick of [-1, -0.5, 0, 0.5, 1]) {
    svg.append(
      svgElement("line", { x1: margin.left, x2: width - margin.right, y1: y(tick), y2: y(tick), class: tick === 0 ? "axis" : "grid" }),
      svgElement("text", { x: margin.left - 6, y: y(tick) + 4, "text-anchor": "end", class: "tick" }, String(tick)),
    );
  }
  turns.forEach((turn, i) => {
    svg.append(svgElement("text", { x: x(i), y: height - 8, "text-anchor": "middle", class: "tick" }, String(turn.index)));
  });
  for (const [dim, colour] of MOOD_DIMS) {
    // a turn without a mood (none recorded) has no point; the line joins the others
    const points = turns.flatMap((turn, i) => {
      const value = (turn.mood ?? {})[dim];
      return typeof value === "number" ? [{ turn: turn.index, value, px: x(i), py: y(value) }] : [];
    });
    svg.append(
      svgElement("polyline", {
        points: points.map(({ px, py }) => `${px},${py}`).join(" "),
        fill: "none",
        stroke: colour,
        "stroke-width": 2,
        "data-dim": dim,
      }),
    );
    for (const { turn, value, px, py } of points) {
      const point = svgElement("circle", {
        cx: px,
        cy: py,
        r: 4,
        fill: colour,
        "data-testid": "mood-point",
        "data-turn": turn,
        "data-dim": dim,
        "data-value": String(value),
      });
      point.append(svgElement("title", {}, `turn ${turn} ${dim} ${formatNumber(value)}`));
      point.addEventListener("click", () => document.getElementById(`turn-${turn}`)?.scrollIntoView({ block: "nearest" }));
      svg.append(point);
    }
  }
  legend.replaceChildren(
    ...MOOD_DIMS.map(([dim, colour]) => {
      const swatch = svgElement("svg", { width: 12, height: 12, class: "swatch" });
      swatch.append(svgElement("rect", { width: 12, height: 12, fill: colour }));
      return element("span", {}, swatch, ` ${dim}`);
    }),
  );
}
