/**
 * The TypeScript wire models against the Python ones: every `I*` interface of
 * src/models.ts has exactly the fields of its pydantic model (`json_schemas()` in
 * jupyter_to_job/models.py), so the two cannot drift apart unnoticed.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import { JOB_STATUSES } from '../models';

const REPO = path.resolve(__dirname, '..', '..', '..');
const PYTHON = path.join(REPO, '.venv', 'bin', 'python');

interface ISchema {
  properties?: { [field: string]: unknown };
  enum?: string[];
}

function pythonSchemas(): { [model: string]: ISchema } {
  if (!fs.existsSync(PYTHON)) {
    throw new Error(
      `${PYTHON} is missing: run \`make setup\` before the jest tests.`
    );
  }
  const output = execFileSync(
    PYTHON,
    [
      '-c',
      'import json; from jupyter_to_job.models import json_schemas; print(json.dumps(json_schemas()))'
    ],
    { cwd: REPO }
  );
  return JSON.parse(output.toString());
}

function typescriptInterfaces(): { [model: string]: string[] } {
  const source = fs.readFileSync(
    path.join(__dirname, '..', 'models.ts'),
    'utf-8'
  );
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

describe('the TypeScript wire models mirror the Python ones', () => {
  const schemas = pythonSchemas();
  const interfaces = typescriptInterfaces();

  it('has an interface for every wire model, and no other', () => {
    const models = Object.keys(schemas).filter(name => name !== 'JobStatus');
    expect(Object.keys(interfaces).sort()).toEqual(models.sort());
  });

  it.each(Object.keys(typescriptInterfaces()))(
    'I%s has the fields of the Python model, in order',
    model => {
      expect(interfaces[model]).toEqual(
        Object.keys(schemas[model]?.properties ?? {})
      );
    }
  );

  it('lists the statuses of JobStatus, in order', () => {
    expect([...JOB_STATUSES]).toEqual(schemas.JobStatus.enum);
  });
});
