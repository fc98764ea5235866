// Four outputs of one input x (16x4 f32, row-sharded over 8 devices): x + 1, 2x and x - 3 with
// the same shape, type and sharding as x (so an output handed to another's placeholder keeps
// its layout and is told apart only by its values), and x * x replicated.
module @executor_same_layout_outputs attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"},
          tensor<16x4xf32> {mhlo.sharding = "{replicated}"}) {
    %one = stablehlo.constant dense<1.0> : tensor<16x4xf32>
    %two = stablehlo.constant dense<2.0> : tensor<16x4xf32>
    %three = stablehlo.constant dense<3.0> : tensor<16x4xf32>
    %plus_one = stablehlo.add %x, %one : tensor<16x4xf32>
    %doubled = stablehlo.multiply %x, %two : tensor<16x4xf32>
    %minus_three = stablehlo.subtract %x, %three : tensor<16x4xf32>
    %squared = stablehlo.multiply %x, %x : tensor<16x4xf32>
    return %plus_one, %doubled, %minus_three, %squared
        : tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
  }
}
