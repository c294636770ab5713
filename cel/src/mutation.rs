//! The object literals of MutatingAdmissionPolicy expressions: `Object{spec: Object.spec{replicas: 3}}` (an apply
//! configuration) and `JSONPatch{op: "add", path: "/metadata/labels/x", value: "y"}`. cel-go types these
//! dynamically; here each becomes a map of its fields, which is what the policy reads back as JSON, after the check
//! upstream makes (`CheckTypeNamesMatchFieldPathNames`): a nested `Object` literal's type name is its parent's
//! followed by the field's name (`Object.spec{selector: Object.spec.wrong{}}` is refused).

use cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};

use crate::CompileError;

/// The root type of an apply configuration.
pub(crate) const OBJECT: &str = "Object";
/// The type of one JSON patch operation.
pub(crate) const JSON_PATCH: &str = "JSONPatch";

/// Rewrites every object literal of `expr` into a map literal; `expected` is the type name a literal at this place
/// must have (inside an `Object` literal's field, or a list there).
pub(crate) fn rewrite(
    expr: &mut IdedExpr,
    expected: Option<&str>,
    next_id: &mut u64,
) -> Result<(), CompileError> {
    match &mut expr.expr {
        Expr::Struct(literal) => {
            let name = literal.type_name.clone();
            let is_object = name == OBJECT || name.starts_with("Object.");
            if !is_object && name != JSON_PATCH {
                return Err(CompileError::Syntax(format!(
                    "undeclared reference to '{name}' (in container '')"
                )));
            }
            if is_object
                && let Some(expected) = expected
                && expected != name
            {
                return Err(CompileError::Syntax(format!(
                    "type mismatch: unexpected type name \"{name}\", expected \"{expected}\", which matches field name path from root Object type"
                )));
            }
            let mut entries = Vec::with_capacity(literal.entries.len());
            for entry in std::mem::take(&mut literal.entries) {
                let EntryExpr::StructField(field) = entry.expr else {
                    return Err(CompileError::Syntax("malformed object literal".into()));
                };
                let mut value = field.value;
                let nested = is_object.then(|| format!("{name}.{}", field.field));
                rewrite(&mut value, nested.as_deref(), next_id)?;
                *next_id += 1;
                let key = IdedExpr {
                    id: *next_id,
                    expr: Expr::Literal(LiteralValue::String(field.field.into())),
                };
                entries.push(IdedEntryExpr {
                    id: entry.id,
                    expr: EntryExpr::MapEntry(MapEntryExpr {
                        key,
                        value,
                        optional: field.optional,
                    }),
                });
            }
            expr.expr = Expr::Map(MapExpr { entries });
            Ok(())
        }
        Expr::List(list) => list
            .elements
            .iter_mut()
            .try_for_each(|e| rewrite(e, expected, next_id)),
        Expr::Map(map) => map.entries.iter_mut().try_for_each(|e| match &mut e.expr {
            EntryExpr::MapEntry(entry) => {
                rewrite(&mut entry.key, None, next_id)?;
                rewrite(&mut entry.value, None, next_id)
            }
            EntryExpr::StructField(field) => rewrite(&mut field.value, None, next_id),
        }),
        Expr::Select(select) => rewrite(&mut select.operand, None, next_id),
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                rewrite(target, None, next_id)?;
            }
            call.args
                .iter_mut()
                .try_for_each(|a| rewrite(a, None, next_id))
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                rewrite(part, None, next_id)?;
            }
            Ok(())
        }
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => Ok(()),
    }
}

/// `jsonpatch.escapeKey`: a map key as one JSON pointer segment (`~` → `~0`, `/` → `~1`).
pub(crate) fn escape_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use crate::{Activation, Program, value_to_json};
    use serde_json::json;

    fn evaluate(source: &str) -> serde_json::Value {
        let program = Program::compile_mutation(source).unwrap();
        let activation = Activation::new().bind_json("object", &json!({"spec": {"replicas": 2}}));
        value_to_json(&program.evaluate(&activation).unwrap()).unwrap()
    }

    #[test]
    fn object_literals_are_maps_of_their_fields() {
        assert_eq!(
            evaluate(
                "Object{spec: Object.spec{replicas: object.spec.replicas + 1, ?paused: optional.none()}}"
            ),
            json!({"spec": {"replicas": 3}})
        );
        assert_eq!(
            evaluate("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'a'}]}}"),
            json!({"spec": {"containers": [{"name": "a"}]}})
        );
        assert_eq!(
            evaluate(
                "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b~c'), value: 'x'}]"
            ),
            json!([{"op": "add", "path": "/metadata/labels/a~1b~0c", "value": "x"}])
        );
    }

    #[test]
    fn mismatched_or_unknown_literals_do_not_compile() {
        let err =
            Program::compile_mutation("Object{spec: Object.spec{selector: Object.spec.wrong{}}}")
                .unwrap_err()
                .to_string();
        assert!(
            err.contains(
                "unexpected type name \"Object.spec.wrong\", expected \"Object.spec.selector\""
            ),
            "{err}"
        );
        assert!(Program::compile_mutation("Pod{x: 1}").is_err());
        // Plain programs have no object literals.
        assert!(
            Program::compile("Object{spec: 1}")
                .is_ok_and(|p| p.evaluate(&Activation::new()).is_err())
        );
    }
}
