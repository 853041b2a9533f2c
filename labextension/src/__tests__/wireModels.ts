/**
 * Reading both sides of a wire contract for the drift checks: the fields of each
 * `I*` interface of a TypeScript file, and the JSON schemas of pydantic models.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const REPO = path.resolve(__dirname, '..', '..', '..');
const PYTHON = path.join(REPO, '.venv', 'bin', 'python');

/**
 * What the Python `code` prints as JSON, run with the project's virtual environment.
 */
export function pythonJSON<T>(code: string): T {
  if (!fs.existsSync(PYTHON)) {
    throw new Error(
      `${PYTHON} is missing: run \`make setup\` before the jest tests.`
    );
  }
  return JSON.parse(
    execFileSync(PYTHON, ['-c', code], { cwd: REPO }).toString()
  );
}

/**
 * The JSON schemas of the named pydantic models of `module`, by model name.
 */
export function pythonSchemas(
  module: string,
  models: string[]
): { [model: string]: { properties?: { [field: string]: unknown } } } {
  return pythonJSON(
    [
      'import importlib, json, sys',
      `module = importlib.import_module(${JSON.stringify(module)})`,
      `names = ${JSON.stringify(models)}`,
      'print(json.dumps({n: getattr(module, n).model_json_schema() for n in names}))'
    ].join('\n')
  );
}

/**
 * True when the Python module can be imported (the back end has it).
 */
export function pythonHas(module: string): boolean {
  if (!fs.existsSync(PYTHON)) {
    return false;
  }
  try {
    execFileSync(PYTHON, ['-c', `import ${module}`], {
      cwd: REPO,
      stdio: 'ignore'
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * The fields of every `export interface I<Name>` of `file` (under src/), in order.
 */
export function typescriptInterfaces(file: string): {
  [model: string]: string[];
} {
  const source = fs.readFileSync(path.join(__dirname, '..', file), 'utf-8');
  const interfaces: { [model: string]: string[] } = {};
  const declaration = /export interface I(\w+) \{([\s\S]*?)\n\}/g;
  for (
    let match = declaration.exec(source);
    match;
    match = declaration.exec(source)
  ) {
    const body = match[2].replace(/\/\*\*[\s\S]*?\*\//g, '');
    const fields: string[] = [];
    const field = /^\s*(\w+)\??:/gm;
    for (let found = field.exec(body); found; found = field.exec(body)) {
      fields.push(found[1]);
    }
    interfaces[match[1]] = fields;
  }
  return interfaces;
}

/**
 * The scenarios of a drift check: the `I*` interfaces of `file` (under src/) are
 * exactly `models`, each with the fields of its pydantic model in `module`, in order.
 */
export function itMirrorsPythonModels(
  file: string,
  module: string,
  what: string,
  models: string[]
): void {
  const interfaces = typescriptInterfaces(file);
  const schemas = pythonSchemas(module, Object.keys(interfaces));

  it(`mirrors the ${what} API’s models`, () => {
    expect(Object.keys(interfaces).sort()).toEqual(models);
  });

  it.each(Object.keys(interfaces))(
    'I%s has the fields of the Python model, in order',
    model => {
      expect(interfaces[model]).toEqual(
        Object.keys(schemas[model]?.properties ?? {})
      );
    }
  );
}
