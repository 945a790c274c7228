/**
 * The two Workers' wrangler configs (wrangler.jsonc, src/notifier/wrangler.jsonc) as the scripts
 * read and edit them: JSON with comments, which wrangler reads too. An edit changes the one value
 * it names and leaves every comment and the layout around it as it was, so that a config the
 * deploy or `shards add` wrote reads like one a person wrote, and its diff shows only the change.
 */
import { readFileSync } from "node:fs";
import * as jsonc from "jsonc-parser";

/** A config as parsed: the fields the scripts read are checked where they are read. */
export type ConfigObject = Record<string, unknown>;

/** The parsed text of a config; a text that is not JSONC, or not an object, throws naming the file. */
export function parseConfigText(text: string, file: string): ConfigObject {
  const errors: jsonc.ParseError[] = [];
  const value: unknown = jsonc.parse(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0) {
    const { error, offset } = errors[0]!;
    const line = text.slice(0, offset).split("\n").length;
    throw new Error(`${file}:${line}: not valid JSONC (${jsonc.printParseErrorCode(error)}).`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`${file}: not a JSON object.`);
  return value as ConfigObject;
}

/** A config file, parsed. */
export function readConfigFile(file: string): ConfigObject {
  return parseConfigText(readFileSync(file, "utf8"), file);
}

/**
 * The config's text with the value at `at` set (or, with `insert`, a new array element put at that
 * index), formatted as the files are: two spaces, one field a line.
 */
export function editConfigText(text: string, at: jsonc.JSONPath, value: unknown, options: { insert?: boolean } = {}): string {
  const edits = jsonc.modify(text, at, value, {
    formattingOptions: { insertSpaces: true, tabSize: 2, eol: "\n" },
    isArrayInsertion: options.insert ?? false,
  });
  return jsonc.applyEdits(text, edits);
}
