/**
 * Notebook parameters in the Run as Job dialog: how a default written in Python
 * reads in a text box, and how what the user typed becomes a JSON value of the
 * right type for papermill to inject.
 */
import { INotebookParameter, JsonValue } from '../common/models';

/**
 * How a parameter's value is read:
 * - `int`, `float`, `bool`, `str`: one value of that type;
 * - `json`: a list or dict;
 * - `none`: the default is `None`, so any literal (or text) goes;
 * - `expression`: the default is code (`np.arange(5)`), not a literal.
 */
export type ParameterKind =
  'int' | 'float' | 'bool' | 'str' | 'json' | 'none' | 'expression';

/**
 * A typed value, or the sentence that says what is wrong with the text.
 */
export type CoercedValue =
  { ok: true; value: JsonValue } | { ok: false; message: string };

const INT = /^[+-]?\d(?:_?\d)*$/;
const FLOAT =
  /^[+-]?(?:\d(?:_?\d)*\.?(?:\d(?:_?\d)*)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d+)?$/;

/**
 * The kind of a parameter: from its annotation when papermill found one, else from
 * its default.
 */
export function parameterKind(parameter: INotebookParameter): ParameterKind {
  const annotation = unwrapOptional(parameter.inferred_type_name ?? '');
  switch (annotation.toLowerCase()) {
    case 'int':
      return 'int';
    case 'float':
      return 'float';
    case 'bool':
      return 'bool';
    case 'str':
      return 'str';
  }
  if (/^(list|dict|tuple)\b/i.test(annotation)) {
    return 'json';
  }
  return kindOfLiteral(parameter.default ?? '');
}

/**
 * The text a parameter's box starts with: the default as written, except that a
 * string loses its quotes ("'adam'" reads as "adam").
 */
export function editableText(
  parameter: INotebookParameter,
  kind: ParameterKind = parameterKind(parameter)
): string {
  const written = (parameter.default ?? '').trim();
  if (kind === 'str') {
    const value = parsePythonLiteral(written);
    if (typeof value === 'string') {
      return value;
    }
  }
  return written;
}

/**
 * The string a str parameter's box means. The box shows a string without its quotes,
 * so text that is one whole Python string literal (`'run1'`, `"run 1"`) was typed
 * as Python, the way the notebook's parameters cell writes it, and means what is
 * between the quotes, as papermill's `-y "run: 'run1'"` does; anything else is
 * passed exactly as typed. To pass quotes themselves, quote them: `"'run1'"`.
 */
export function stringTyped(text: string): string {
  const trimmed = text.trim();
  if (/^(['"]).*\1$/s.test(trimmed) && trimmed.length >= 2) {
    const value = parsePythonLiteral(trimmed);
    if (typeof value === 'string') {
      return value;
    }
  }
  return text;
}

/**
 * Read what the user typed as a value of `kind`.
 */
export function coerceParameter(
  text: string,
  kind: ParameterKind
): CoercedValue {
  const trimmed = text.trim();
  switch (kind) {
    case 'str':
      return { ok: true, value: stringTyped(text) };
    case 'int': {
      const value = Number(trimmed.replace(/_/g, ''));
      if (INT.test(trimmed) && Number.isSafeInteger(value)) {
        return { ok: true, value };
      }
      return fail('Enter a whole number, such as 3.');
    }
    case 'float': {
      const value = Number(trimmed.replace(/_/g, ''));
      if (FLOAT.test(trimmed) && Number.isFinite(value)) {
        return { ok: true, value };
      }
      return fail('Enter a number, such as 0.01 or 1e-3.');
    }
    case 'bool': {
      const lower = trimmed.toLowerCase();
      if (lower === 'true' || lower === 'false') {
        return { ok: true, value: lower === 'true' };
      }
      return fail('Enter True or False.');
    }
    case 'json': {
      const value = parsePythonLiteral(trimmed);
      if (value !== undefined && typeof value === 'object') {
        return { ok: true, value };
      }
      return fail(
        'Enter a list or a dict, in Python or JSON notation, such as [1, 2] or {"a": 1}.'
      );
    }
    case 'none': {
      if (trimmed === '' || trimmed === 'None') {
        return { ok: true, value: null };
      }
      const value = parsePythonLiteral(trimmed);
      return { ok: true, value: value === undefined ? text : value };
    }
    default: {
      const value = parsePythonLiteral(trimmed);
      if (value !== undefined) {
        return { ok: true, value };
      }
      return fail(
        "Enter a value such as 3, 0.5, 'text', True or [1, 2]; code cannot be passed as a parameter."
      );
    }
  }
}

/**
 * The values to send with a job: only the parameters whose text differs from the
 * text they started with (the notebook's own defaults need no injection).
 *
 * @param parameters The notebook's parameters.
 * @param texts What each box holds now, by parameter name.
 * @returns The typed values, and a sentence for each box that cannot be read.
 */
export function changedParameters(
  parameters: readonly INotebookParameter[],
  texts: { [name: string]: string }
): {
  values: { [name: string]: JsonValue };
  problems: { [name: string]: string };
} {
  const values: { [name: string]: JsonValue } = {};
  const problems: { [name: string]: string } = {};
  for (const parameter of parameters) {
    const kind = parameterKind(parameter);
    const text = texts[parameter.name];
    if (text === undefined || text === editableText(parameter, kind)) {
      continue;
    }
    const coerced = coerceParameter(text, kind);
    if (coerced.ok) {
      values[parameter.name] = coerced.value;
    } else {
      problems[parameter.name] = coerced.message;
    }
  }
  return { values, problems };
}

/**
 * The box texts for a rerun: each parameter's default, except where the earlier job
 * passed a value, which shows as the user would type it ('run1' without its quotes in
 * a str box, True, [1, 2]).
 */
export function rerunTexts(
  parameters: readonly INotebookParameter[],
  passed: { [name: string]: JsonValue }
): { [name: string]: string } {
  const texts: { [name: string]: string } = {};
  for (const parameter of parameters) {
    const kind = parameterKind(parameter);
    texts[parameter.name] =
      parameter.name in passed
        ? typedText(passed[parameter.name], kind)
        : editableText(parameter, kind);
  }
  return texts;
}

/**
 * What a box shows for `value`: a string in a str box as is (unless the box would
 * read it without its quotes), anything else as a Python literal.
 */
export function typedText(value: JsonValue, kind: ParameterKind): string {
  if (kind === 'str' && typeof value === 'string') {
    return stringTyped(value) === value ? value : pythonLiteral(value);
  }
  return pythonLiteral(value);
}

/**
 * `value` written in Python: None, True, 3, "text", [1, 2], {"a": 1}.
 */
export function pythonLiteral(value: JsonValue): string {
  if (value === null) {
    return 'None';
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'number' || typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(pythonLiteral).join(', ')}]`;
  }
  const items = Object.entries(value).map(
    ([key, item]) => `${JSON.stringify(key)}: ${pythonLiteral(item)}`
  );
  return `{${items.join(', ')}}`;
}

/**
 * Read a Python (or JSON) literal: numbers, strings, True/False/None, lists,
 * tuples (as lists) and dicts with string keys.
 *
 * @returns The value, or undefined when `text` is not such a literal.
 */
export function parsePythonLiteral(text: string): JsonValue | undefined {
  const parser = new LiteralParser(text);
  try {
    const value = parser.value();
    parser.skipSpace();
    return parser.atEnd() ? value : undefined;
  } catch {
    return undefined;
  }
}

function fail(message: string): CoercedValue {
  return { ok: false, message };
}

function unwrapOptional(annotation: string): string {
  let name = annotation.trim().replace(/^typing\./, '');
  const optional = /^Optional\[(.*)\]$/.exec(name);
  if (optional) {
    name = optional[1];
  }
  return name
    .split('|')
    .map(part => part.trim())
    .filter(part => part !== 'None')
    .join(' | ');
}

function kindOfLiteral(written: string): ParameterKind {
  const text = written.trim();
  if (text === 'None') {
    return 'none';
  }
  if (INT.test(text)) {
    return 'int';
  }
  if (FLOAT.test(text)) {
    return 'float';
  }
  if (text === 'True' || text === 'False') {
    return 'bool';
  }
  const value = parsePythonLiteral(text);
  if (typeof value === 'string') {
    return 'str';
  }
  if (value !== undefined && value !== null && typeof value === 'object') {
    return 'json';
  }
  return 'expression';
}

const ESCAPES: { [letter: string]: string } = {
  n: '\n',
  t: '\t',
  r: '\r',
  '0': '\0',
  '\\': '\\',
  "'": "'",
  '"': '"'
};

/**
 * A small recursive-descent reader of Python and JSON literals.
 */
class LiteralParser {
  constructor(private readonly _text: string) {}

  atEnd(): boolean {
    return this._at >= this._text.length;
  }

  skipSpace(): void {
    while (!this.atEnd() && /\s/.test(this._text[this._at])) {
      this._at++;
    }
  }

  value(): JsonValue {
    this.skipSpace();
    const char = this._text[this._at];
    if (char === '[' || char === '(') {
      return this._sequence(char === '[' ? ']' : ')');
    }
    if (char === '{') {
      return this._dict();
    }
    if (char === '"' || char === "'") {
      return this._string();
    }
    const word = /^[A-Za-z_]+/.exec(this._text.slice(this._at));
    if (word) {
      const constants: { [name: string]: JsonValue } = {
        True: true,
        False: false,
        None: null,
        true: true,
        false: false,
        null: null
      };
      if (!(word[0] in constants)) {
        throw new SyntaxError(`not a literal: ${word[0]}`);
      }
      this._at += word[0].length;
      return constants[word[0]];
    }
    const number = /^[+-]?[\d.][\d_.]*(?:[eE][+-]?\d+)?/.exec(
      this._text.slice(this._at)
    );
    if (number && FLOAT.test(number[0])) {
      this._at += number[0].length;
      return Number(number[0].replace(/_/g, ''));
    }
    throw new SyntaxError('not a literal');
  }

  private _sequence(close: string): JsonValue[] {
    this._at++;
    const items: JsonValue[] = [];
    for (;;) {
      this.skipSpace();
      if (this._text[this._at] === close) {
        this._at++;
        return items;
      }
      items.push(this.value());
      this.skipSpace();
      if (this._text[this._at] === ',') {
        this._at++;
      } else if (this._text[this._at] !== close) {
        throw new SyntaxError('expected , or the end of the list');
      }
    }
  }

  private _dict(): { [key: string]: JsonValue } {
    this._at++;
    const items: { [key: string]: JsonValue } = {};
    for (;;) {
      this.skipSpace();
      if (this._text[this._at] === '}') {
        this._at++;
        return items;
      }
      const key = this.value();
      if (typeof key !== 'string') {
        throw new SyntaxError('dict keys must be strings');
      }
      this.skipSpace();
      if (this._text[this._at] !== ':') {
        throw new SyntaxError('expected :');
      }
      this._at++;
      items[key] = this.value();
      this.skipSpace();
      if (this._text[this._at] === ',') {
        this._at++;
      } else if (this._text[this._at] !== '}') {
        throw new SyntaxError('expected , or }');
      }
    }
  }

  private _string(): string {
    const quote = this._text[this._at++];
    let value = '';
    while (!this.atEnd()) {
      const char = this._text[this._at++];
      if (char === quote) {
        return value;
      }
      if (char === '\\' && !this.atEnd()) {
        const escaped = this._text[this._at++];
        value += ESCAPES[escaped] ?? `\\${escaped}`;
      } else {
        value += char;
      }
    }
    throw new SyntaxError('unterminated string');
  }

  private _at = 0;
}
