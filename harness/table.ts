/** Plain-text tables for the harnesses' reports (bench, soak). */

/** Columns padded to their widest cell: the first to the left, the others (figures) to the right. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ");
  return [format(header), ...rows.map(format)].join("\n");
}
