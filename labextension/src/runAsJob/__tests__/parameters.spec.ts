import {
  changedParameters,
  coerceParameter,
  editableText,
  ParameterKind,
  parameterKind,
  parsePythonLiteral
} from '../parameters';
import { INotebookParameter, JsonValue } from '../../common/models';

function parameter(
  name: string,
  written: string,
  annotation = 'None'
): INotebookParameter {
  return { name, default: written, inferred_type_name: annotation, help: '' };
}

describe('parameterKind, how a parameter’s box is read', () => {
  it('follows the annotation when the cell has one', () => {
    expect(parameterKind(parameter('epochs', '10', 'int'))).toBe('int');
    expect(parameterKind(parameter('lr', '1', 'float'))).toBe('float');
    expect(parameterKind(parameter('name', 'None', 'Optional[str]'))).toBe(
      'str'
    );
    expect(parameterKind(parameter('sizes', '[1]', 'list[int]'))).toBe('json');
    expect(parameterKind(parameter('debug', 'False', 'bool | None'))).toBe(
      'bool'
    );
  });

  it('reads the kind from the default when there is no annotation', () => {
    expect(parameterKind(parameter('epochs', '10'))).toBe('int');
    expect(parameterKind(parameter('lr', '1e-3'))).toBe('float');
    expect(parameterKind(parameter('lr', '0.01'))).toBe('float');
    expect(parameterKind(parameter('debug', 'True'))).toBe('bool');
    expect(parameterKind(parameter('model', "'resnet18'"))).toBe('str');
    expect(parameterKind(parameter('layers', '[64, 128]'))).toBe('json');
    expect(parameterKind(parameter('opts', "{'momentum': 0.9}"))).toBe('json');
    expect(parameterKind(parameter('seed', 'None'))).toBe('none');
  });

  it('calls a default that is code an expression', () => {
    expect(parameterKind(parameter('xs', 'np.arange(5)'))).toBe('expression');
    expect(parameterKind(parameter('home', "os.environ['HOME']"))).toBe(
      'expression'
    );
  });
});

describe('editableText, what a box starts with', () => {
  it('shows a string without its quotes', () => {
    expect(editableText(parameter('model', "'resnet18'"))).toBe('resnet18');
    expect(editableText(parameter('path', String.raw`"data/it\'s.csv"`))).toBe(
      "data/it's.csv"
    );
  });

  it('shows every other default as written', () => {
    expect(editableText(parameter('lr', '0.01'))).toBe('0.01');
    expect(editableText(parameter('layers', '[64, 128]'))).toBe('[64, 128]');
    expect(editableText(parameter('debug', 'True'))).toBe('True');
  });
});

/**
 * Expect `text` typed for a parameter of `kind` to be sent as `value`.
 */
function sends(text: string, kind: ParameterKind, value: JsonValue): void {
  expect(coerceParameter(text, kind)).toEqual({ ok: true, value });
}

describe('coerceParameter, typed values for papermill', () => {
  it('sends whole numbers as JSON numbers', () => {
    sends(' 20 ', 'int', 20);
    sends('1_000', 'int', 1000);
    sends('-3', 'int', -3);
  });

  it('refuses what is not a whole number for an int', () => {
    for (const text of ['2.5', 'ten', '', '1e3']) {
      expect(coerceParameter(text, 'int')).toEqual({
        ok: false,
        message: 'Enter a whole number, such as 3.'
      });
    }
  });

  it('sends floats as JSON numbers, in any Python spelling', () => {
    sends('0.001', 'float', 0.001);
    sends('1e-3', 'float', 0.001);
    sends('.5', 'float', 0.5);
    sends('3', 'float', 3);
    expect(coerceParameter('fast', 'float').ok).toBe(false);
    expect(coerceParameter('nan', 'float').ok).toBe(false);
  });

  it('sends booleans as JSON booleans', () => {
    sends('False', 'bool', false);
    sends('true', 'bool', true);
    expect(coerceParameter('yes', 'bool')).toEqual({
      ok: false,
      message: 'Enter True or False.'
    });
  });

  it('sends a string exactly as typed', () => {
    sends(' resnet 50 ', 'str', ' resnet 50 ');
  });

  it('takes a string typed in Python quotes as what is between them', () => {
    // 'run1' typed as the parameters cell writes it means run1, as papermill reads it
    sends("'run1'", 'str', 'run1');
    sends(' "run 1" ', 'str', 'run 1');
    // quotes meant as part of the value are quoted themselves
    sends('"\'run1\'"', 'str', "'run1'");
    // and text that is not one whole string literal is passed as typed
    sends("it's 'done'", 'str', "it's 'done'");
    sends("'a' + 'b'", 'str', "'a' + 'b'");
  });

  it('reads lists and dicts in Python or JSON notation', () => {
    sends("[1, 2.5, 'a', True, None]", 'json', [1, 2.5, 'a', true, null]);
    sends('{"a": [1, 2], "b": false}', 'json', { a: [1, 2], b: false });
    sends('(1, 2)', 'json', [1, 2]);
    expect(coerceParameter('[1, 2', 'json').ok).toBe(false);
    expect(coerceParameter('3', 'json').ok).toBe(false);
  });

  it('takes any literal, or the text, where the default was None', () => {
    sends('None', 'none', null);
    sends('', 'none', null);
    sends('42', 'none', 42);
    sends('cuda:0', 'none', 'cuda:0');
  });

  it('accepts a literal in place of code, and refuses other code', () => {
    sends('[0, 1, 2]', 'expression', [0, 1, 2]);
    expect(coerceParameter('np.arange(3)', 'expression').ok).toBe(false);
  });
});

describe('changedParameters, the values sent with a job', () => {
  const parameters = [
    parameter('lr', '0.01'),
    parameter('epochs', '10', 'int'),
    parameter('model', "'resnet18'"),
    parameter('xs', 'np.arange(5)')
  ];
  const untouched = {
    lr: '0.01',
    epochs: '10',
    model: 'resnet18',
    xs: 'np.arange(5)'
  };

  it('sends nothing when no box was changed', () => {
    expect(changedParameters(parameters, untouched)).toEqual({
      values: {},
      problems: {}
    });
  });

  it('sends only the changed boxes, typed', () => {
    expect(
      changedParameters(parameters, {
        ...untouched,
        epochs: '20',
        model: 'resnet50'
      })
    ).toEqual({ values: { epochs: 20, model: 'resnet50' }, problems: {} });
  });

  it('reports each box that cannot be read, by name', () => {
    const result = changedParameters(parameters, {
      ...untouched,
      lr: 'fast',
      epochs: '3'
    });
    expect(result.values).toEqual({ epochs: 3 });
    expect(result.problems).toEqual({
      lr: 'Enter a number, such as 0.01 or 1e-3.'
    });
  });
});

describe('parsePythonLiteral', () => {
  it('reads nested literals and escapes', () => {
    expect(parsePythonLiteral("{'a': [1, {'b': 'x\\ny'}], 'c': -2e3}")).toEqual(
      {
        a: [1, { b: 'x\ny' }],
        c: -2000
      }
    );
  });

  it('allows trailing commas as Python does', () => {
    expect(parsePythonLiteral('[1, 2,]')).toEqual([1, 2]);
  });

  it('returns undefined for anything that is not one literal', () => {
    for (const text of ['', 'x', '1 2', "'open", 'f(1)', '{1: 2}', '1.2.3']) {
      expect(parsePythonLiteral(text)).toBeUndefined();
    }
  });
});
