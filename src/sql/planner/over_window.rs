//! Lowering window functions (other than the top-N pattern) to an over-window.

use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;

use super::*;
use crate::stream::executor::over_window::{OverWindowSpec, output_schema};

impl Planner<'_> {
    /// The window functions of `window`, all over one `PARTITION BY` and `ORDER BY` (DataFusion
    /// plans functions over others as windows one above the other).
    pub(super) fn over_window(
        &mut self,
        window: &datafusion::logical_expr::Window,
    ) -> Result<StreamNode> {
        let in_schema = window.input.schema();
        let mut over = None;
        for expr in &window.window_expr {
            let Expr::WindowFunction(f) = expr.clone().unalias_nested().data else {
                return Err(unsupported!("{expr} in a materialized view"));
            };
            if f.params.filter.is_some() {
                return Err(unsupported!(
                    "{expr} (a window function with FILTER) in a materialized view"
                ));
            }
            let this = (f.params.partition_by.clone(), f.params.order_by.clone());
            match &over {
                None => over = Some(this),
                Some(over) if *over == this => {}
                Some(_) => {
                    return Err(unsupported!(
                        "window functions over different windows in one window node of a \
                         materialized view ({expr})"
                    ));
                }
            }
        }
        let Some((partition_by, order_by)) = over else {
            return Err(unsupported!("a window without functions in a materialized view"));
        };
        let partition =
            partition_by.iter().map(|e| self.physical(e, in_schema)).collect::<Result<Vec<_>>>()?;
        let order = self.sort_keys(&order_by, in_schema)?;
        let calls = window
            .window_expr
            .iter()
            .map(|e| {
                if temporal::reads_now(e) || is_volatile(e) {
                    return Err(unsupported!(
                        "non-deterministic function in {e} in a materialized view"
                    ));
                }
                Ok(datafusion::physical_planner::create_window_expr(
                    e,
                    in_schema,
                    self.state.execution_props(),
                    &PhysicalPlanningContext::default(),
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        let input = exchange(self.lower(&window.input)?, partition.clone());
        let n_partition = partition.len();
        let n_values = calls.len();
        let value_fields: Vec<Field> = window.schema.fields()[in_schema.fields().len()..]
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        // The state table: partition values, order, the input row, window values, emitted.
        let mut partition_fields = Vec::new();
        for (i, p) in partition.iter().enumerate() {
            let ty = p.data_type(input.schema.as_ref())?;
            partition_fields.push(Field::new(format!("_partition_{i}"), ty, true));
        }
        let mut extra = Vec::new();
        for (i, field) in value_fields.iter().enumerate() {
            extra.push(column(&format!("value_{i}"), field.data_type())?);
        }
        extra.push(column("_emitted", &ArrowType::Boolean)?);
        let table = self.ordered_rows(StatePurpose::OverWindow, &partition, &input, extra)?;
        let visible = input.visible;
        let schema = output_schema(&input.schema, visible, &value_fields, &partition_fields);
        let mut stream_key: Vec<usize> =
            input.stream_key.iter().map(|&k| if k >= visible { k + n_values } else { k }).collect();
        let width = input.schema.fields().len() + n_values;
        stream_key.extend(width..width + n_partition);
        let spec = OverWindowSpec {
            partition,
            order,
            calls,
            visible_schema: Arc::new(in_schema.as_arrow().clone()),
        };
        Ok(StreamNode {
            kind: NodeKind::OverWindow { spec, table },
            inputs: vec![input],
            schema,
            visible: visible + n_values,
            stream_key,
            dist: None,
        })
    }
}
